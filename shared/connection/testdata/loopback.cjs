// Preloaded with `node -r` by the e2e suites that run Node servers
// (@modelcontextprotocol/server-everything, the MCP conformance suite):
// every TCP server the process starts listens on 127.0.0.1 only, whatever
// host (or none) its code asks for; listen(port), or listen() with no port,
// alone would bind all interfaces.
//
// listen with a host resolves it through dns.lookup, which answers on a
// later tick, so the server would have no address() right after listen
// returns; code written for listen(port), which binds at once, reads it
// there (the conformance suite does). During the call only, the lookup of
// the literal 127.0.0.1 answers at once, so the bind stays synchronous.
'use strict';
const net = require('net');
const dns = require('dns');
const listen = net.Server.prototype.listen;

function listenLoopback(server, options, cb) {
  const lookup = dns.lookup;
  dns.lookup = function (host, ...rest) {
    const callback = rest[rest.length - 1];
    if (host === '127.0.0.1' && typeof callback === 'function') {
      callback(null, '127.0.0.1', 4);
      return {};
    }
    return lookup.call(this, host, ...rest);
  };
  try {
    return listen.call(server, { ...options, host: '127.0.0.1' }, cb);
  } finally {
    dns.lookup = lookup;
  }
}

net.Server.prototype.listen = function (...args) {
  const cb = typeof args[args.length - 1] === 'function' ? args[args.length - 1] : undefined;
  const first = args[0];
  if (first === undefined || first === null || typeof first === 'function') {
    // listen(), listen(cb), listen(null, ...): a random port on every
    // interface, unless pinned here.
    return listenLoopback(this, { port: 0 }, cb);
  }
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    return listenLoopback(this, { port: Number(first) }, cb);
  }
  if (first && typeof first === 'object' && !('path' in first) && !('fd' in first) && !('handle' in first)) {
    return listenLoopback(this, first, cb);
  }
  return listen.apply(this, args);
};
