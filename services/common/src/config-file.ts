import { parse as parseYaml } from "yaml";

/**
 * Parses the text of a configuration file written as YAML or JSON (JSON is YAML 1.2), so every
 * service reads its files with the same parser as the model catalog. Throws with the parser's
 * message, which names the line.
 */
export function parseConfigText(text: string): unknown {
  return parseYaml(text) as unknown;
}
