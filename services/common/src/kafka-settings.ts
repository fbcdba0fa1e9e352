import type { EnvReader } from "./env-config.ts";
import type { KafkaSettings } from "./kafka.ts";

/** Reads the Kafka client settings every service shares (`KAFKA_*`). */
export function readKafkaSettings(env: EnvReader, clientId: string): KafkaSettings {
  const username = env.optionalString("KAFKA_SASL_USERNAME");
  const password = env.optionalString("KAFKA_SASL_PASSWORD");
  const mechanism = env.oneOf("KAFKA_SASL_MECHANISM", ["plain", "scram-sha-256", "scram-sha-512"] as const, "plain");
  if ((username === undefined) !== (password === undefined)) {
    env.problem("KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD must be set together");
  }
  const base = {
    brokers: env.list("KAFKA_BROKERS", ["127.0.0.1:9092"]),
    clientId,
    ssl: env.bool("KAFKA_SSL", false),
    connectionTimeoutMs: env.int("KAFKA_CONNECTION_TIMEOUT_MS", 1_000, { min: 100 }),
    requestTimeoutMs: env.int("KAFKA_REQUEST_TIMEOUT_MS", 10_000, { min: 100 }),
  };
  return username !== undefined && password !== undefined ? { ...base, sasl: { mechanism, username, password } } : base;
}
