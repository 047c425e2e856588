// Run under the loopback.cjs preload by TestInteropLoopbackPreload: starts
// a TCP server with each form of listen that opens a TCP port, and prints
// the address each bound, as JSON keyed by the form.
'use strict';
const net = require('net');
const forms = {
  'listen()': s => s.listen(),
  'listen(cb)': s => s.listen(() => {}),
  'listen(undefined)': s => s.listen(undefined),
  'listen(null, cb)': s => s.listen(null, () => {}),
  'listen(0)': s => s.listen(0),
  "listen('0')": s => s.listen('0'),
  'listen(0, 511, cb)': s => s.listen(0, 511, () => {}),
  "listen(0, '0.0.0.0')": s => s.listen(0, '0.0.0.0'),
  "listen(0, '::', cb)": s => s.listen(0, '::', () => {}),
  'listen({port: 0})': s => s.listen({ port: 0 }),
  "listen({port: 0, host: '::'})": s => s.listen({ port: 0, host: '::' }),
};
(async () => {
  const out = {};
  for (const [name, listen] of Object.entries(forms)) {
    const s = net.createServer();
    await new Promise((resolve) => { s.once('listening', resolve); listen(s); });
    out[name] = s.address().address;
    await new Promise((resolve) => s.close(resolve));
  }
  console.log(JSON.stringify(out));
})();
