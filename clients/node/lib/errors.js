// Every error of a call is an IdemjobError: one subclass per condition
// (clients/README.md), the SQLSTATE, the server's message, detail and hint,
// and the ids from the error's fields (PG_DIAG_CONSTRAINT_NAME's key=value
// pairs, trusted only when the schema field is "idemjob"), never from the
// text.  toHTTP() maps it as docs/reference.md#errors does.

// condition names, for the HTTP body's "error"
const NAMES = {
  IJ001: 'idempotency_conflict', IJ002: 'attempt_in_doubt', IJ003: 'job_finished',
  IJ004: 'provider_not_certified', IJ005: 'invalid_transition', IJ006: 'not_found',
  IJ007: 'key_expired', IJ008: 'lease_expired',
  22004: 'null_value_not_allowed', 22023: 'invalid_parameter_value', '22P02': 'invalid_text_representation',
  22003: 'numeric_value_out_of_range', 22007: 'invalid_datetime_format', 22008: 'datetime_field_overflow',
  22015: 'interval_field_overflow', 22021: 'character_not_in_repertoire', '22P05': 'untranslatable_character',
  '2201B': 'invalid_regular_expression', 42501: 'insufficient_privilege', 42602: 'invalid_name',
  42704: 'undefined_object', 42883: 'undefined_function', '0A000': 'feature_not_supported',
  25006: 'read_only_sql_transaction', 40001: 'serialization_failure', '40P01': 'deadlock_detected',
  '55P03': 'lock_not_available', 57014: 'query_canceled', 55000: 'object_not_in_prerequisite_state',
  54000: 'program_limit_exceeded', 54001: 'statement_too_complex', '57P01': 'admin_shutdown',
  '57P02': 'crash_shutdown', '57P03': 'cannot_connect_now', XX000: 'internal_error',
};
// where docs/reference.md's HTTP column differs from the class's
const STATUS = { '2201B': 500, 54001: 400 };

export class IdemjobError extends Error {
  constructor(message, opts = {}) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = new.target.name;
    /** the SQLSTATE, or undefined (a connection lost with no SQLSTATE) */
    this.sqlstate = opts.sqlstate;
    this.detail = opts.detail;
    this.hint = opts.hint;
    /** the table the ids refer to (jobs, attempts, spent_keys, contracts, certifications) */
    this.table = opts.table;
    /** the call that failed (submit, claim, ...) */
    this.call = opts.call;
    /** every key=value pair of the error's fields, as sent */
    this.fields = opts.fields || {};
    const f = this.fields;
    if (f.job_id !== undefined) this.jobId = f.job_id;
    if (f.attempt_id !== undefined) this.attemptId = f.attempt_id;
    if (f.state !== undefined) this.state = f.state;
    if (f.deadline !== undefined) {
      this.deadlineText = f.deadline;
      this.deadline = new Date(f.deadline);
    }
    if (f.retry_after !== undefined) this.retryAfter = Number(f.retry_after);
  }

  /** The condition name (idempotency_conflict, ...), for an HTTP body. */
  get condition() {
    return NAMES[this.sqlstate] || this.constructor.condition || 'internal_error';
  }

  /** The HTTP status an API in front answers with. */
  get status() {
    return STATUS[this.sqlstate] || this.constructor.status;
  }

  /** {status, headers, body}: IJ002 adds Retry-After; the body's keys are snake_case, as on the wire. */
  toHTTP() {
    const headers = {};
    if (this.retryAfter !== undefined) headers['Retry-After'] = String(this.retryAfter);
    const body = { error: this.condition, sqlstate: this.sqlstate ?? null, message: this.message };
    for (const k of ['job_id', 'attempt_id', 'state', 'deadline']) {
      if (this.fields[k] !== undefined) body[k] = this.fields[k];
    }
    return { status: this.status, headers, body };
  }

  toJSON() {
    return { name: this.name, sqlstate: this.sqlstate, message: this.message, detail: this.detail, hint: this.hint, fields: this.fields };
  }
}
IdemjobError.status = 500;
IdemjobError.condition = 'internal_error';

const sub = (name, status, condition) => {
  const C = { [name]: class extends IdemjobError {} }[name];
  C.status = status;
  C.condition = condition;
  return C;
};
export const IdempotencyConflict = sub('IdempotencyConflict', 409, 'idempotency_conflict');
export const AttemptInDoubt = sub('AttemptInDoubt', 409, 'attempt_in_doubt');
export const JobFinished = sub('JobFinished', 409, 'job_finished');
export const ProviderNotCertified = sub('ProviderNotCertified', 422, 'provider_not_certified');
export const InvalidTransition = sub('InvalidTransition', 409, 'invalid_transition');
export const NotFound = sub('NotFound', 404, 'not_found');
export const KeyExpired = sub('KeyExpired', 410, 'key_expired');
export const LeaseExpired = sub('LeaseExpired', 409, 'lease_expired');
export const InvalidArgument = sub('InvalidArgument', 400, 'invalid_argument');
export const PermissionDenied = sub('PermissionDenied', 403, 'insufficient_privilege');
export const RetryTransaction = sub('RetryTransaction', 503, 'retry_transaction');
export const Unavailable = sub('Unavailable', 503, 'unavailable');
export const ConnectionLost = sub('ConnectionLost', 503, 'connection_lost');

const BY_CODE = {
  IJ001: IdempotencyConflict, IJ002: AttemptInDoubt, IJ003: JobFinished, IJ004: ProviderNotCertified,
  IJ005: InvalidTransition, IJ006: NotFound, IJ007: KeyExpired, IJ008: LeaseExpired,
  42602: InvalidArgument, 42704: InvalidArgument, 42501: PermissionDenied,
  40001: RetryTransaction, '40P01': RetryTransaction, '55P03': RetryTransaction,
  25006: Unavailable, 55000: Unavailable, 57014: Unavailable,
};

/** The class for a SQLSTATE (undefined: no SQLSTATE). */
export function classFor(sqlstate) {
  if (!sqlstate) return ConnectionLost;
  if (BY_CODE[sqlstate]) return BY_CODE[sqlstate];
  const cls = sqlstate.slice(0, 2);
  if (cls === '22') return InvalidArgument;
  if (cls === '53') return Unavailable;
  if (cls === '08' || sqlstate.startsWith('57P0')) return ConnectionLost;
  return IdemjobError;
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

// what node-postgres (and node's sockets) throw when a connection breaks,
// with no SQLSTATE: the call may or may not have run
const LOST_MESSAGES = [
  'Connection terminated unexpectedly', // the server or the network closed it mid-call
  'Connection terminated', // the client was ended with the call queued or running
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Connection terminated due to connection timeout',
  'timeout exceeded when trying to connect',
  'timeout expired', // connect_timeout
  'Query read timeout', // query_timeout
  'read ECONNRESET', 'write EPIPE',
];
const LOST_ERRNO = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'ENOENT', 'EHOSTUNREACH',
  'ENETUNREACH', 'ENETDOWN', 'EAI_AGAIN', 'ENOTFOUND', 'EADDRNOTAVAIL', 'ERR_STREAM_DESTROYED',
  'ERR_SOCKET_CLOSED', 'EACCES',
]);

/** True when the error means the connection is gone: no SQLSTATE, 08xxx or 57P0x. */
export function isConnectionError(err) {
  if (!err || err.idemjobParse) return false;
  const code = typeof err.code === 'string' ? err.code : undefined;
  if (code && SQLSTATE.test(code) && err.severity !== undefined) {
    return code.startsWith('08') || code.startsWith('57P0');
  }
  return true; // node-postgres' own errors, socket errors: the connection is not to be trusted
}

/** Does this message or errno say the connection broke? (for reports; every non-server error counts). */
export function looksLost(err) {
  return Boolean(err) && (LOST_ERRNO.has(err.code) || LOST_MESSAGES.some((m) => String(err.message).includes(m)));
}

/** The IdemjobError for anything a call can throw. */
export function toIdemjobError(err, call, { sent = true } = {}) {
  if (err instanceof IdemjobError) return err;
  if (err && err.idemjobParse) return new IdemjobError(err.message, { call, cause: err.cause });
  const server = err && typeof err.code === 'string' && SQLSTATE.test(err.code) && err.severity !== undefined;
  if (!server) {
    const e = new ConnectionLost(
      sent ? `connection lost during ${call}: ${err && err.message}` : `no connection for ${call}: ${err && err.message}`,
      { call, cause: err });
    e.sent = sent;
    e.errno = err && err.code;
    return e;
  }
  const fields = err.schema === 'idemjob' && err.constraint ? parseFields(err.constraint) : {};
  const Cls = classFor(err.code);
  const e = new Cls(err.message, {
    sqlstate: err.code, detail: err.detail, hint: err.hint, table: err.schema === 'idemjob' ? err.table : undefined,
    call, fields, cause: err,
  });
  if (Cls === ConnectionLost) e.sent = sent;
  return e;
}

/** "job_id=... state=in_doubt" -> {job_id: ..., state: 'in_doubt'} */
export function parseFields(text) {
  const out = {};
  for (const pair of text.split(' ')) {
    const eq = pair.indexOf('=');
    if (eq > 0) out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

/**
 * What a worker's handler throws for a definite failure: the worker calls
 * fail_attempt(error, retryable).  Any other exception is a failure too,
 * reported as {"code": "exception", ...}, retryable.
 */
export class Failure extends Error {
  constructor(error, retryable = true) {
    const e = typeof error === 'string' ? { code: error } : (error ?? { code: 'failed' });
    super(typeof e === 'object' && (e.message || e.code) ? String(e.message || e.code) : 'failure');
    this.name = 'Failure';
    this.error = e;
    this.retryable = typeof retryable === 'object' && retryable !== null ? retryable.retryable !== false : retryable !== false;
  }
}

export { NAMES as CONDITIONS };
