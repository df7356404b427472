// Connection strings as libpq takes them: a key=value DSN
// ("host=/run/postgresql port=5432 dbname=app user=worker") or a
// postgresql:// URL ("postgresql://worker@/app?host=/run/postgresql"),
// turned into a node-postgres config.  A host that starts with "/" is a
// unix-socket directory (node-postgres connects to <dir>/.s.PGSQL.<port>).
import { readFileSync } from 'node:fs';

// libpq keys node-postgres has no use for: accepted and ignored
const IGNORED = new Set([
  'passfile', 'channel_binding', 'client_encoding', 'gssencmode', 'sslcompression', 'sslcrl',
  'sslcrldir', 'sslsni', 'requirepeer', 'ssl_min_protocol_version', 'ssl_max_protocol_version',
  'krbsrvname', 'gsslib', 'gssdelegation', 'service', 'target_session_attrs', 'load_balance_hosts',
  'sslpassword', 'require_auth', 'sslcertmode', 'tcp_user_timeout', 'keepalives_interval',
  'keepalives_count', 'fallback_application_name', 'sslnegotiation',
]);
const KNOWN = new Set([
  'host', 'hostaddr', 'port', 'dbname', 'user', 'password', 'application_name', 'options',
  'connect_timeout', 'sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'keepalives', 'keepalives_idle',
  ...IGNORED,
]);

/** Parses a libpq key=value connection string into {key: value}. */
export function parseKeyValue(dsn) {
  const out = {};
  let i = 0;
  const n = dsn.length;
  const space = (c) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v';
  while (true) {
    while (i < n && space(dsn[i])) i++;
    if (i >= n) break;
    let key = '';
    while (i < n && dsn[i] !== '=' && !space(dsn[i])) key += dsn[i++];
    while (i < n && space(dsn[i])) i++;
    if (dsn[i] !== '=') throw new TypeError(`connection string: missing "=" after "${key}"`);
    i++;
    while (i < n && space(dsn[i])) i++;
    let value = '';
    if (dsn[i] === "'") {
      i++;
      while (true) {
        if (i >= n) throw new TypeError('connection string: unterminated quoted string');
        if (dsn[i] === '\\' && i + 1 < n) { value += dsn[i + 1]; i += 2; continue; }
        if (dsn[i] === "'") { i++; break; }
        value += dsn[i++];
      }
    } else {
      while (i < n && !space(dsn[i])) {
        if (dsn[i] === '\\' && i + 1 < n) { value += dsn[i + 1]; i += 2; continue; }
        value += dsn[i++];
      }
    }
    if (!key) throw new TypeError('connection string: empty key');
    out[key] = value;
  }
  return out;
}

const decode = (s) => decodeURIComponent(s);

/** Parses a postgresql:// (or postgres://) URL into libpq's {key: value}. */
export function parseURL(url) {
  const m = /^postgres(?:ql)?:\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?(?:#.*)?$/.exec(url);
  if (!m) throw new TypeError('connection string: not a postgresql:// URL');
  const [, authority, path, query] = m;
  const out = {};
  let hostport = authority;
  const at = authority.lastIndexOf('@');
  if (at >= 0) {
    const userinfo = authority.slice(0, at);
    hostport = authority.slice(at + 1);
    const colon = userinfo.indexOf(':');
    if (colon >= 0) {
      out.user = decode(userinfo.slice(0, colon));
      out.password = decode(userinfo.slice(colon + 1));
    } else if (userinfo) {
      out.user = decode(userinfo);
    }
  }
  if (hostport) {
    if (hostport.includes(',')) throw new TypeError('connection string: several hosts are not supported');
    let host = hostport;
    let port;
    const v6 = /^\[([^\]]*)\](?::(\d*))?$/.exec(hostport);
    if (v6) {
      [, host, port] = v6;
    } else {
      const colon = hostport.lastIndexOf(':');
      if (colon >= 0) { host = hostport.slice(0, colon); port = hostport.slice(colon + 1); }
    }
    if (host) out.host = decode(host);
    if (port) out.port = port;
  }
  if (path && path !== '/') out.dbname = decode(path.slice(1));
  if (query) {
    for (const part of query.split('&')) {
      if (!part) continue;
      const eq = part.indexOf('=');
      const k = decode((eq >= 0 ? part.slice(0, eq) : part).replace(/\+/g, ' '));
      const v = eq >= 0 ? decode(part.slice(eq + 1).replace(/\+/g, ' ')) : '';
      out[k] = v;
    }
  }
  return out;
}

/** A DSN or URL as libpq's {key: value}. */
export function parseDSN(dsn) {
  if (typeof dsn !== 'string') throw new TypeError('connection string must be a string');
  return /^postgres(?:ql)?:\/\//.test(dsn) ? parseURL(dsn) : parseKeyValue(dsn);
}

/** libpq's {key: value} as a node-postgres Client/Pool config. */
export function toPgConfig(kv) {
  const cfg = {};
  for (const [k, v] of Object.entries(kv)) {
    if (!KNOWN.has(k)) throw new TypeError(`connection string: invalid connection option "${k}"`);
  }
  const host = kv.host || kv.hostaddr;
  if (host !== undefined && host !== '') {
    if (host.includes(',')) throw new TypeError('connection string: several hosts are not supported');
    cfg.host = host;
  }
  if (kv.port) {
    const port = Number(kv.port);
    if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new TypeError(`connection string: invalid port "${kv.port}"`);
    cfg.port = port;
  }
  if (kv.dbname) cfg.database = kv.dbname;
  if (kv.user) cfg.user = kv.user;
  if (kv.password !== undefined) cfg.password = kv.password;
  if (kv.application_name) cfg.application_name = kv.application_name;
  else if (kv.fallback_application_name) cfg.fallback_application_name = kv.fallback_application_name;
  if (kv.options) cfg.options = kv.options;
  if (kv.connect_timeout && Number(kv.connect_timeout) > 0) cfg.connectionTimeoutMillis = Number(kv.connect_timeout) * 1000;
  if (kv.keepalives !== undefined) cfg.keepAlive = kv.keepalives !== '0';
  if (kv.keepalives_idle) cfg.keepAliveInitialDelayMillis = Number(kv.keepalives_idle) * 1000;
  const mode = kv.sslmode;
  if (mode && !['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'].includes(mode)) {
    throw new TypeError(`connection string: invalid sslmode "${mode}"`);
  }
  if (mode === 'require' || mode === 'verify-ca' || mode === 'verify-full') {
    // libpq: "require" with a root certificate present verifies like verify-ca
    const ssl = { rejectUnauthorized: mode !== 'require' || Boolean(kv.sslrootcert) };
    if (kv.sslrootcert) ssl.ca = readFileSync(kv.sslrootcert, 'utf8');
    if (kv.sslcert) ssl.cert = readFileSync(kv.sslcert, 'utf8');
    if (kv.sslkey) ssl.key = readFileSync(kv.sslkey, 'utf8');
    if (mode === 'verify-ca') ssl.checkServerIdentity = () => undefined;
    cfg.ssl = ssl;
  } else if (mode) {
    cfg.ssl = false; // disable, allow, prefer: node-postgres cannot fall back, so plain
  }
  return cfg;
}
