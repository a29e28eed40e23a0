export type Route = { view: "sessions" } | { view: "viewers"; session?: string } | { view: "viewer"; id: string };

/** Hash routes: #/sessions, #/viewers, #/viewers/<session>, #/viewer/<id>. */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "viewer" && parts[1]) return { view: "viewer", id: parts[1] };
  if (parts[0] === "viewers") return parts[1] ? { view: "viewers", session: parts[1] } : { view: "viewers" };
  return { view: "sessions" };
}
