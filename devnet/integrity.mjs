// Checks a file against an npm `dist.integrity` (sha512-<base64>): exits 1, naming both, on a mismatch.
//   node devnet/integrity.mjs FILE sha512-...
import { createHash } from "node:crypto";
import fs from "node:fs";

const [file, expected] = process.argv.slice(2);
const [algorithm, digest] = expected.split("-", 2);
const actual = createHash(algorithm).update(fs.readFileSync(file)).digest("base64");
if (actual !== digest) {
  console.error(`integrity mismatch for ${file}: expected ${expected}, got ${algorithm}-${actual}`);
  fs.rmSync(file, { force: true });
  process.exit(1);
}
