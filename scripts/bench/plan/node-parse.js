const fs = require('fs');
const t0 = process.hrtime.bigint();
const text = fs.readFileSync(process.argv[2], 'utf8');
let n = 0;
for (const line of text.split('\n')) { if (line) { JSON.parse(line); n++; } }
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
console.log(`${n} lines ${ms.toFixed(1)} ms`);
