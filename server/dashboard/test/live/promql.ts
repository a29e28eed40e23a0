// Small helpers to pull PromQL out of our rule and dashboard files (no YAML dependency: the
// rule file's layout is ours and fixed: `- alert: NAME` followed by `expr:` scalar or block).

export interface AlertExpr {
  name: string;
  expr: string;
}

export function alertExpressions(yaml: string): AlertExpr[] {
  const lines = yaml.split("\n");
  const out: AlertExpr[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^\s*- alert:\s*(\S+)/.exec(lines[i]!);
    if (!m) continue;
    for (let j = i + 1; j < lines.length && !/^\s*- (alert|record):/.test(lines[j]!); j++) {
      const e = /^(\s*)expr:\s*(.*)$/.exec(lines[j]!);
      if (!e) continue;
      if (e[2] === "|" || e[2] === ">") {
        const indent = e[1]!.length;
        const body: string[] = [];
        for (let k = j + 1; k < lines.length; k++) {
          const l = lines[k]!;
          if (l.trim() === "" || l.search(/\S/) > indent) body.push(l.trim());
          else break;
        }
        out.push({ name: m[1]!, expr: body.join(" ").trim() });
      } else {
        out.push({ name: m[1]!, expr: e[2]!.trim() });
      }
      break;
    }
  }
  return out;
}

/**
 * The operand compared against the threshold: for `A > B` (top level, outside brackets) returns
 * A. An alert's full expression is empty while it is not firing; A must still have data.
 */
export function thresholdOperand(expr: string): string {
  let depth = 0;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i]!;
    if (c === "(" || c === "{" || c === "[") depth++;
    else if (c === ")" || c === "}" || c === "]") depth--;
    else if (depth === 0) {
      const two = expr.slice(i, i + 2);
      if (two === "==" || two === "!=" || two === ">=" || two === "<=") return expr.slice(0, i).trim();
      if (c === ">" || c === "<") return expr.slice(0, i).trim();
    }
  }
  return expr.trim();
}

export interface PanelQuery {
  panel: string;
  expr: string;
}

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

export function grafanaQueries(dashboard: { panels?: Panel[] }): PanelQuery[] {
  const out: PanelQuery[] = [];
  const walk = (ps: Panel[] | undefined) => {
    for (const p of ps ?? []) {
      for (const t of p.targets ?? []) if (t.expr) out.push({ panel: p.title ?? "?", expr: t.expr });
      walk(p.panels);
    }
  };
  walk(dashboard.panels);
  return out;
}

/** Replace Grafana variables ($name and ${name}). */
export function substitute(expr: string, vars: Record<string, string>): string {
  return expr.replace(/\$\{?(\w+)\}?/g, (m, name: string) => vars[name] ?? m);
}
