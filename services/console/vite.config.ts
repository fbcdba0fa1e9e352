import { defineConfig } from "vite";

// Served by the gateway at /console/ (services/gateway/src/console-static.ts).
export default defineConfig({
  base: "/console/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // The protobuf runtime is most of the ~162 kB (49 kB gzipped, with the registry form of issue
    // #48); warn if the page outgrows it.
    chunkSizeWarningLimit: 170,
  },
  server: { port: 5173 },
});
