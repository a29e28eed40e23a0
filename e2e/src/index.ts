// @layercast/e2e: the namespace testbed as a library (see docs/testbed.md).
export { Net, cleanup, offloadsOff, NS_PREFIX } from './netns.js';
export { LinkEmu, ctlRequest, type LinkSettings, type Snapshot } from './linkemu.js';
export { parseScenario, loadScenario, expand, monitorNames, type Scenario } from './scenario.js';
export { buildTopology, type Built, type BuildOptions } from './topology.js';
export { runScenario, type RunOptions, type RunResult } from './runner.js';
export { Monitor, measure, jain, minMaxRatio } from './metrics.js';
export { measureLeaveLatency } from './leave.js';
export { FrrRouter, routerConfig, withFrrDefaults, FRR_CONF } from './frr.js';
export { pimLatency, pimSettle, pimSenderRate } from './pim.js';
export { svgChart, writeReport } from './report.js';
export { findBinary } from './bins.js';
export { run, nsRun, ProcessSet, sleep } from './sh.js';
export { recordAcceptance } from './acceptance.js';
export { analysePlayer, analyseRun, timingStats, parseFramesCsv, qualitySummary, qualityHtml, type PlayerQuality } from './quality.js';
export { compareScenario, compareSummaries, compareText, runSim } from './compare.js';
export { runFull, fullScenarios, FULL_CHECKS, summaryTable } from './full.js';
