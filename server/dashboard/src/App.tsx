import { useEffect, useMemo, useState, useSyncExternalStore } from "react";
import { fmtClock } from "./format";
import { Live } from "./live";
import { parseRoute, type Route } from "./route";
import { SessionsView } from "./SessionsView";
import { ViewerDetail } from "./ViewerDetail";
import { ViewersView } from "./ViewersView";

function useRoute(): Route {
  const [hash, setHash] = useState(window.location.hash);
  useEffect(() => {
    const f = () => setHash(window.location.hash);
    window.addEventListener("hashchange", f);
    return () => window.removeEventListener("hashchange", f);
  }, []);
  return parseRoute(hash);
}

export function App() {
  const live = useMemo(() => new Live({ base: import.meta.env.VITE_LAYERCAST_API ?? "" }), []);
  useEffect(() => {
    live.start();
    return () => live.stop();
  }, [live]);
  useSyncExternalStore(live.subscribe, () => live.tick);
  const route = useRoute();
  const m = live.model;
  const st = live.status;
  const [, force] = useState(0);
  // Re-render once a second while waiting so the retry countdown moves.
  useEffect(() => {
    if (st.state !== "waiting") return;
    const id = setInterval(() => force((x) => x + 1), 1000);
    return () => clearInterval(id);
  }, [st.state]);
  const connText =
    st.state === "open"
      ? "live"
      : st.state === "connecting"
        ? "connecting…"
        : `disconnected, retry in ${Math.max(0, Math.ceil(((st.retryAt ?? Date.now()) - Date.now()) / 1000))} s`;
  return (
    <div className="app">
      <nav className="top">
        <span className="brand">Layercast</span>
        <a href="#/sessions" className={route.view === "sessions" ? "active" : ""}>
          Sessions ({m.sessions.length})
        </a>
        <a href="#/viewers" className={route.view !== "sessions" ? "active" : ""}>
          Viewers ({m.agg.active})
        </a>
        <span className="spacer" />
        <span className={`conn conn-${st.state}`} data-testid="conn" title={st.lastError ?? ""}>
          ● {connText}
        </span>
        <span className="muted">{m.version > 0 ? fmtClock(m.t) : "no data yet"}</span>
        {st.parseErrors > 0 && <span className="warn">{st.parseErrors} bad frames</span>}
      </nav>
      <main>
        {route.view === "sessions" && <SessionsView model={m} />}
        {route.view === "viewers" && <ViewersView key={route.session ?? ""} model={m} session={route.session} />}
        {route.view === "viewer" && <ViewerDetail model={m} id={route.id} />}
      </main>
    </div>
  );
}
