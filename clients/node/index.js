// idemjob from Node: connect() -> Client (one method per SQL function, over
// a pooler-safe pg.Pool), typed errors, and the Worker runtime.
export { connect, Client, resendSafe } from './lib/client.js';
export { Worker } from './lib/worker.js';
export {
  IdemjobError, IdempotencyConflict, AttemptInDoubt, JobFinished, ProviderNotCertified,
  InvalidTransition, NotFound, KeyExpired, LeaseExpired, InvalidArgument, PermissionDenied,
  RetryTransaction, Unavailable, ConnectionLost, Failure, classFor, parseFields,
} from './lib/errors.js';
export { parseDSN, toPgConfig } from './lib/dsn.js';
export { toJson } from './lib/types.js';
