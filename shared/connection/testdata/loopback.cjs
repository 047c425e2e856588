// Preloaded with `node -r` by the e2e interop test: every TCP server the
// process starts listens on 127.0.0.1 only, whatever host (or none) its code
// asks for. @modelcontextprotocol/server-everything calls app.listen(PORT),
// which would bind all interfaces.
'use strict';
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const cb = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    return listen.call(this, { port: Number(first), host: '127.0.0.1' }, cb);
  }
  if (first && typeof first === 'object' && !('path' in first) && !('fd' in first) && !('handle' in first)) {
    return listen.call(this, { ...first, host: '127.0.0.1' }, cb);
  }
  return listen.apply(this, args);
};
