// Values between JavaScript and PostgreSQL, without loss:
//   bigint       -> number when |n| <= 2^53 - 1, else BigInt
//   timestamptz  -> Date (milliseconds) plus the exact instant as text,
//                   ISO 8601 in UTC with microseconds, in a parallel
//                   `<name>Text` field ("2030-01-02T03:04:05.123456Z")
//   interval     -> milliseconds (a number, fractional below 1 ms;
//                   months as 30 days, days as 24 h, as EXTRACT(epoch) does)
//   jsonb        -> JSON.parse (or the client's `parseJson`); a BigInt in a
//                   value sent is written as an exact JSON number
const OID = { int8: 20, json: 114, jsonb: 3802, timestamptz: 1184, interval: 1186 };

export function parseInt8(text) {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}

/** A timestamptz as the server sent it, until a row is shaped. */
export class Stamp {
  constructor(date, text) { this.date = date; this.text = text; }
}

// "2030-01-02 03:04:05.123456+00", "1999-12-31 23:00:00-05:30", "0044-03-15 00:00:00+00 BC"
const TS = /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?(?:([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?)?( BC)?$/;

export function parseTimestamptz(text) {
  if (text === 'infinity' || text === '-infinity') return new Stamp(new Date(NaN), text);
  const m = TS.exec(text);
  if (!m) { // another DateStyle: Date as JavaScript reads it, the text as the server sent it
    return new Stamp(new Date(text), text);
  }
  const [, y, mo, d, h, mi, s, frac = '', sign, oh = '0', om = '0', os = '0', bc] = m;
  let year = Number(y);
  if (bc) year = 1 - year;
  const offset = (sign === '-' ? -1 : 1) * (Number(oh) * 3600 + Number(om) * 60 + Number(os));
  const micros = (frac + '000000').slice(0, 6);
  const date = new Date(0);
  date.setUTCFullYear(year, Number(mo) - 1, Number(d));
  date.setUTCHours(Number(h), Number(mi), Number(s), Number(micros.slice(0, 3)));
  date.setTime(date.getTime() - offset * 1000);
  return new Stamp(date, isoMicros(date, micros));
}

/** ISO 8601 in UTC with six fractional digits. */
export function isoMicros(date, micros) {
  const iso = date.toISOString(); // ...THH:MM:SS.mmmZ
  return `${iso.slice(0, -5)}.${micros}Z`;
}

// the postgres IntervalStyle: "1 year 2 mons 3 days 04:05:06.789", "-00:00:01", "@ 1 sec" is not it
const IV_PART = /(-?\d+) (year|mon|day)s?/g;
const IV_TIME = /(-|\+)?(\d+):(\d\d):(\d\d)(?:\.(\d+))?/;

export function parseInterval(text) {
  let ms = 0;
  let matched = false;
  for (const m of text.matchAll(IV_PART)) {
    matched = true;
    const n = Number(m[1]);
    if (m[2] === 'year') ms += n * 365.25 * 86400000;
    else if (m[2] === 'mon') ms += n * 30 * 86400000;
    else ms += n * 86400000;
  }
  const t = IV_TIME.exec(text);
  if (t) {
    matched = true;
    const frac = t[5] ? Number(`0.${t[5]}`) : 0;
    const v = (Number(t[2]) * 3600 + Number(t[3]) * 60 + Number(t[4]) + frac) * 1000;
    ms += t[1] === '-' ? -v : v;
  }
  if (!matched) {
    const iso = /^P/.test(text) ? parseIsoInterval(text) : null;
    return iso === null ? text : iso; // an IntervalStyle not understood: the text
  }
  return Math.round(ms * 1000) / 1000;
}

function parseIsoInterval(text) { // IntervalStyle iso_8601: P1Y2M3DT4H5M6.789S
  const m = /^P(?:(-?[\d.]+)Y)?(?:(-?[\d.]+)M)?(?:(-?[\d.]+)W)?(?:(-?[\d.]+)D)?(?:T(?:(-?[\d.]+)H)?(?:(-?[\d.]+)M)?(?:(-?[\d.]+)S)?)?$/.exec(text);
  if (!m) return null;
  const [, y = 0, mo = 0, w = 0, d = 0, h = 0, mi = 0, s = 0] = m.map((x, i) => (i && x ? Number(x) : 0));
  const ms = ((((y * 365.25 + mo * 30 + w * 7 + d) * 24 + h) * 60 + mi) * 60 + s) * 1000;
  return Math.round(ms * 1000) / 1000;
}

/** The text parsers a pool uses, by type oid (per pool: pg's global parsers stay untouched). */
export function typeParsers(parseJson = JSON.parse) {
  const parsers = {
    [OID.int8]: parseInt8,
    [OID.timestamptz]: parseTimestamptz,
    [OID.interval]: parseInterval,
    [OID.json]: parseJson,
    [OID.jsonb]: parseJson,
  };
  // a value the client cannot read is the client's error, not a lost
  // connection (node-postgres reads the rest of the answer and keeps it)
  for (const [oid, parse] of Object.entries(parsers)) {
    parsers[oid] = (text) => {
      try {
        return parse(text);
      } catch (e) {
        const err = new Error(`cannot read a value of type oid ${oid}: ${e && e.message}`, { cause: e });
        err.idemjobParse = true;
        throw err;
      }
    };
  }
  return parsers;
}

// ---- values sent

const BIG = '\u0000idemjob-bigint:';
const BIG_RE = /"\\u0000idemjob-bigint:(-?\d+)"/g;

/** JSON text for a jsonb argument; BigInts become exact JSON numbers. */
export function toJson(value) {
  if (value === undefined) return 'null';
  let big = false;
  const text = JSON.stringify(value, (k, v) => {
    if (typeof v === 'bigint') { big = true; return BIG + v.toString(); }
    return v;
  });
  if (text === undefined) return 'null'; // a function or a symbol
  return big ? text.replace(BIG_RE, '$1') : text;
}

/** An interval argument: milliseconds (a number) or PostgreSQL's text ("1s", "2 minutes"). */
export function toInterval(value, name) {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`${name}: not a finite number of milliseconds`);
    return `${value} milliseconds`;
  }
  if (typeof value === 'bigint') return `${value} milliseconds`;
  if (typeof value === 'string') return value;
  throw new TypeError(`${name}: an interval is milliseconds (a number) or a string such as '1s'`);
}

/** A timestamptz argument: a Date, an ISO string (microseconds kept), or milliseconds since the epoch. */
export function toTimestamptz(value, name) {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError(`${name}: invalid Date`);
    return value.toISOString();
  }
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return new Date(value).toISOString();
  throw new TypeError(`${name}: a timestamp is a Date, a string or milliseconds since the epoch`);
}

export { OID };
