import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Lane } from "@shoal/gen/shoal/v1/common_pb.ts";
import { type ClusterService, GetClusterResponseSchema } from "@shoal/gen/shoal/v1/cluster_pb.ts";
import { laneFromName } from "@shoal/common";
import type { ClusterState } from "./cluster-state.ts";

/**
 * ClusterService: the live workers (their resident models, memory and load) and the lag of every
 * pool's lanes, for operators and the console.
 * @param lag records behind per `<pool>/<lane>`, from the gateway's lag monitor
 */
export function createClusterService(state: ClusterState, lag: () => ReadonlyMap<string, number>): ServiceImpl<typeof ClusterService> {
  return {
    getCluster() {
      const now = Date.now();
      return create(GetClusterResponseSchema, {
        workers: state.workers(now),
        lanes: [...lag()].map(([key, records]) => {
          const [pool = "", lane = ""] = key.split("/");
          return { pool, lane: laneFromName(lane) ?? Lane.UNSPECIFIED, records: BigInt(records) };
        }),
        observedUnixMs: BigInt(now),
      });
    },
  };
}
