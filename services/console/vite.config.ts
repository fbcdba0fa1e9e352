import { defineConfig } from "vite";

// Served by the gateway at /console/ (services/gateway/src/console-static.ts).
export default defineConfig({
  base: "/console/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // The protobuf runtime is most of the ~120 kB (34 kB gzipped); warn if the page outgrows it.
    chunkSizeWarningLimit: 160,
  },
  server: { port: 5173 },
});
