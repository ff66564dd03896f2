// Counts the tokens of texts as a model reads them, offline: the npm `tiktoken` package bundles its encodings.
// Reads a JSON array of strings on stdin, writes a JSON array of token counts (o200k_base, GPT-4o's encoding).
import { get_encoding } from 'tiktoken';

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const texts = JSON.parse(Buffer.concat(chunks).toString('utf8'));
if (!Array.isArray(texts) || !texts.every((t) => typeof t === 'string')) {
  process.stderr.write('expected a JSON array of strings on stdin\n');
  process.exit(2);
}
const encoding = get_encoding('o200k_base');
try {
  process.stdout.write(JSON.stringify(texts.map((t) => encoding.encode_ordinary(t).length)));
} finally {
  encoding.free();
}
