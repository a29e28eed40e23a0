import { defineConfig } from "vitest/config";

// No React plugin: esbuild's automatic JSX runtime is all we need (no Babel, no fast refresh),
// which keeps the dependency tree small.
export default defineConfig({
  esbuild: { jsx: "automatic" },
  base: "./",
  build: { outDir: "dist", sourcemap: false, chunkSizeWarningLimit: 400 },
  server: {
    // `npm run dev` proxies the API to a real server or to dev/replay-server.mjs.
    proxy: {
      "/api/live": { target: process.env.LAYERCAST_API ?? "http://127.0.0.1:8080", ws: true },
      "/api": { target: process.env.LAYERCAST_API ?? "http://127.0.0.1:8080" },
    },
  },
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    // The browser test starts real binaries in a network namespace; give it room.
    testTimeout: 180_000,
    hookTimeout: 180_000,
    fileParallelism: false,
  },
});
