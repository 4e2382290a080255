// SPDX-License-Identifier: Apache-2.0
//
// gguf_npm_dump.cjs: what the independent reader @huggingface/gguf sees in
// a GGUF file, in fs-gguf-dump's format (see dump_main.c), for diff:
//
//   node gguf_npm_dump.cjs NPM_PREFIX FILE.gguf
"use strict";
const path = require("path");
const { createRequire } = require("module");

const [prefix, file] = process.argv.slice(2);
if (!prefix || !file) {
	console.error("usage: node gguf_npm_dump.cjs NPM_PREFIX FILE.gguf");
	process.exit(2);
}
const req = createRequire(path.join(path.resolve(prefix), "index.js"));
const { gguf, GGUFValueType } = req("@huggingface/gguf");

const typeName = {
	[GGUFValueType.UINT8]: "u8",
	[GGUFValueType.INT8]: "i8",
	[GGUFValueType.UINT16]: "u16",
	[GGUFValueType.INT16]: "i16",
	[GGUFValueType.UINT32]: "u32",
	[GGUFValueType.INT32]: "i32",
	[GGUFValueType.FLOAT32]: "f32",
	[GGUFValueType.BOOL]: "bool",
	[GGUFValueType.STRING]: "string",
	[GGUFValueType.ARRAY]: "array",
	[GGUFValueType.UINT64]: "u64",
	[GGUFValueType.INT64]: "i64",
	[GGUFValueType.FLOAT64]: "f64",
};

function value(type, v) {
	if (type === GGUFValueType.ARRAY) return `array[${v.length}]`;
	if (type === GGUFValueType.FLOAT32 || type === GGUFValueType.FLOAT64) return "-";
	if (type === GGUFValueType.BOOL) return v ? "true" : "false";
	return String(v);
}

(async () => {
	const r = await gguf(path.resolve(file), { allowLocalFile: true, typedMetadata: true });
	const out = [];
	out.push(`version ${r.metadata.version}`);
	out.push(`data_offset ${r.tensorDataOffset}`);
	for (const [key, e] of Object.entries(r.typedMetadata)) {
		if (key === "version" || key === "tensor_count" || key === "kv_count") continue;
		out.push(`kv ${key} ${typeName[e.type]} ${value(e.type, e.value)}`);
	}
	for (const t of r.tensorInfos)
		out.push(`tensor ${t.name} ${t.dtype} ${t.shape.join(",")} ${r.tensorDataOffset + t.offset}`);
	process.stdout.write(out.join("\n") + "\n");
})().catch((e) => {
	console.error(`gguf_npm_dump: ${file}: ${e.message}`);
	process.exit(1);
});
