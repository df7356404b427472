// Type declarations of the idemjob package (hand-written; the package is plain ES modules).

/** The node-postgres pool underneath (pg.Pool); the fields read here. */
export interface PgPool {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
  end(): Promise<void>;
  on(event: string, listener: (...args: any[]) => void): this;
}
/** Options of pg.Pool (node-postgres), passed through. */
export type PgPoolConfig = Record<string, unknown>;

/** bigint columns: a number when |n| <= 2^53 - 1, else a BigInt. */
export type Int8 = number | bigint;
/** Any JSON value (jsonb). A BigInt inside a value sent is written as an exact JSON number. */
export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };
/** An interval argument: milliseconds, or PostgreSQL's interval text ('1s', '2 minutes'). */
export type Interval = number | string;
/** A timestamptz argument: a Date, an ISO 8601 string (microseconds kept), or milliseconds since the epoch. */
export type Timestamp = Date | string | number;

export type JobState = 'pending' | 'running' | 'in_doubt' | 'succeeded' | 'failed' | 'cancelled';
export type AttemptState = 'started' | 'unknown' | 'succeeded' | 'superseded' | 'failed' | 'cancelled' | 'released';

// Every timestamptz column `x` comes as `x: Date` (milliseconds) and
// `xText: string`, the exact instant in ISO 8601 UTC with microseconds
// ("2030-01-02T03:04:05.123456Z"); both null when the column is NULL.

export interface Submitted {
  jobId: string;
  created: boolean;
  state: JobState;
  version: Int8;
  result: Json;
}

export interface Job {
  id: string;
  ownerId: string;
  idempotencyKey: string;
  intent: string;
  params: Json;
  provider: string;
  state: JobState;
  version: Int8;
  attemptCount: number;
  completedBy: string | null;
  result: Json;
  createdAt: Date;
  createdAtText: string;
  updatedAt: Date;
  updatedAtText: string;
  completedAt: Date | null;
  completedAtText: string | null;
  cancelReason: string | null;
  priority: number;
  runAt: Date;
  runAtText: string;
  maxAttempts: number | null;
  error: Json;
  nextProvider: string | null;
}

export interface Attempt {
  id: string;
  jobId: string;
  ownerId: string;
  attemptNo: number;
  provider: string;
  state: AttemptState;
  readVersion: Int8;
  worker: string | null;
  startedAt: Date;
  startedAtText: string;
  deadline: Date | null;
  deadlineText: string | null;
  finishedAt: Date | null;
  finishedAtText: string | null;
  error: Json;
  resultSha256: Uint8Array | null;
  unknownAt: Date | null;
  unknownAtText: string | null;
  droppedResult: Json;
  leaseUntil: Date | null;
  leaseUntilText: string | null;
}

export interface Completion {
  outcome: 'won' | 'lost' | 'rejected';
  jobId: string;
  jobVersion: Int8;
  winnerAttemptId: string | null;
}

/** A row of claim(): the attempt to run, on `provider`. */
export interface ClaimedAttempt {
  attemptId: string;
  jobId: string;
  ownerId: string;
  intent: string;
  params: Json;
  provider: string;
  attemptNo: number;
  readVersion: Int8;
  deadline: Date | null;
  deadlineText: string | null;
}

export interface Certification {
  intent: string;
  provider: string;
  contractVersion: number;
  certifiedAt: Date;
  certifiedAtText: string;
  evidence: Json;
  revokedAt: Date | null;
  revokedAtText: string | null;
  revokeReason: string | null;
}

/** Interval columns come as milliseconds. */
export interface RetryPolicy {
  intent: string;
  maxAttempts: number | null;
  retryBackoff: number | null;
  retryBackoffMax: number | null;
  updatedAt: Date;
  updatedAtText: string;
  fenceUnknownAfter: number | null;
}

export interface Route {
  intent: string;
  providers: string[];
  updatedAt: Date;
  updatedAtText: string;
}

export interface InDoubtRow {
  jobId: string;
  ownerId: string;
  intent: string;
  attemptId: string;
  attemptNo: number;
  provider: string;
  worker: string | null;
  state: AttemptState;
  startedAt: Date;
  startedAtText: string;
  deadline: Date | null;
  deadlineText: string | null;
  unknownAt: Date | null;
  unknownAtText: string | null;
  inDoubtSince: Date | null;
  inDoubtSinceText: string | null;
  /** milliseconds */
  age: number | null;
}

export interface QueueStatsRow {
  intent: string;
  due: Int8;
  scheduled: Int8;
  running: Int8;
  inDoubt: Int8;
  /** milliseconds */
  oldestDueAge: number | null;
}

export interface ProviderStatsRow {
  intent: string;
  provider: string;
  attempts: Int8;
  succeeded: Int8;
  superseded: Int8;
  rejected: Int8;
  failed: Int8;
  inDoubt: Int8;
  cancelled: Int8;
  p50Ms: number | null;
  p95Ms: number | null;
  lastStartedAt: Date | null;
  lastStartedAtText: string | null;
  released: Int8;
}

/** What `faults.loseAnswer` is given (tests only). */
export interface FaultCall {
  call: string;
  /** 0 for the first send, 1 for the first resend, ... */
  attempt: number;
  text: string;
  values: unknown[];
  /** the answer the client is about to drop */
  result: unknown;
}

export interface ConnectOptions {
  /** a libpq key=value DSN or a postgresql:// URL */
  dsn?: string;
  /** pool size (10) */
  max?: number;
  /** resends of a resend-safe call after ConnectionLost or RetryTransaction (3) */
  retries?: number;
  /** milliseconds before the first resend, doubled for each next one (50) */
  backoff?: number;
  /** milliseconds an idle connection stays in the pool (10000) */
  idleTimeout?: number;
  /** milliseconds to wait for a connection */
  connectTimeout?: number;
  applicationName?: string;
  /** jsonb/json text -> value (JSON.parse: numbers past 2^53 lose precision; plug a lossless parser here) */
  parseJson?: (text: string) => unknown;
  /** more pg.Pool options (they override the DSN's) */
  pg?: PgPoolConfig;
  /**
   * Tests only: called after each call has run (and committed); returning
   * true drops its answer as if the connection had broken, so the client
   * throws ConnectionLost or, for a resend-safe call, sends it again.
   */
  faults?: { loseAnswer?: (call: FaultCall) => boolean };
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
  /** connections opened since connect() */
  created: number;
  /** connections closed since connect() (idle timeout, or broken) */
  removed: number;
  /** connections discarded because they broke during a call */
  broken: number;
}

export type CallName =
  | 'submit' | 'job' | 'awaitJob' | 'cancelJob'
  | 'startAttempt' | 'beginAttempt' | 'completeAttempt' | 'failAttempt' | 'markUnknown' | 'cancelAttempt' | 'heartbeat'
  | 'beginAttempts' | 'completeAttempts'
  | 'claim' | 'abandonAttempts' | 'expireAttempts'
  | 'defineContract' | 'certifyProvider' | 'revokeProvider' | 'setRetryPolicy' | 'setRoute' | 'purge' | 'purgeRaceLog'
  | 'inDoubt' | 'queueStats' | 'providerStats' | 'query';

/** May the call be sent again after its answer was lost (I7)? snake_case names are accepted too. */
export function resendSafe(call: CallName | string, options?: { lease?: boolean; worker?: string | null }): boolean;

export function connect(dsn: string, options?: ConnectOptions): Client;
export function connect(options: ConnectOptions): Client;

export class Client {
  constructor(options?: ConnectOptions);
  readonly pool: PgPool;
  readonly retries: number;
  readonly backoff: number;
  readonly stats: PoolStats;
  end(): Promise<void>;
  /** Your own statement through the same pool (unnamed); rows keep their column names. */
  query<T = Record<string, unknown>>(text: string, values?: unknown[], options?: { resendSafe?: boolean }): Promise<T[]>;

  // jobs
  submit(ownerId: string, idempotencyKey: string, intent: string, options?: {
    params?: Json; provider?: string | null; runAt?: Timestamp | null; priority?: number; maxAttempts?: number | null;
  }): Promise<Submitted>;
  job(jobId: string): Promise<Job>;
  awaitJob(jobId: string, timeout: Interval): Promise<Job>;
  cancelJob(jobId: string, reason: string): Promise<Job>;

  // attempts
  startAttempt(jobId: string, options?: { provider?: string | null; timeout?: Interval | null; worker?: string | null }): Promise<Attempt>;
  beginAttempt(attemptId: string): Promise<Attempt>;
  completeAttempt(attemptId: string, result: Json | undefined): Promise<Completion>;
  failAttempt(attemptId: string, options?: { error?: Json; retryable?: boolean }): Promise<Attempt>;
  markUnknown(attemptId: string, options?: { reason?: string }): Promise<Attempt>;
  cancelAttempt(attemptId: string, reason: string, options?: { fence?: boolean }): Promise<Attempt>;
  heartbeat(attemptId: string, options?: { extend?: Interval | null }): Promise<Attempt>;
  /** begin_attempt for each, in one statement: all or (the first error) none. */
  beginAttempts(attemptIds: string[]): Promise<Attempt[]>;
  /** complete_attempt for each, in one statement: all or (the first error) none; answers in order. */
  completeAttempts(results: Array<{ attemptId: string; result: Json | undefined }>): Promise<Completion[]>;

  // workers
  claim(worker: string, options?: {
    intents?: string[] | null; maxJobs?: number; timeout?: Interval | null; wait?: Interval; lease?: boolean;
  }): Promise<ClaimedAttempt[]>;
  abandonAttempts(worker: string): Promise<number>;
  expireAttempts(): Promise<number>;

  // admin
  defineContract(intent: string, outputSchema: Json): Promise<number>;
  certifyProvider(intent: string, provider: string, options?: { evidence?: Json }): Promise<Certification>;
  revokeProvider(intent: string, provider: string, reason: string): Promise<Certification>;
  setRetryPolicy(intent: string, options?: {
    maxAttempts?: number | null; retryBackoff?: Interval | null; retryBackoffMax?: Interval | null; fenceUnknownAfter?: Interval | null;
  }): Promise<RetryPolicy>;
  setRoute(intent: string, providers: string[]): Promise<Route>;
  purge(olderThan: Interval, options?: { maxJobs?: number }): Promise<number>;
  purgeRaceLog(olderThan: Interval): Promise<number>;

  // views
  inDoubt(): Promise<InDoubtRow[]>;
  queueStats(): Promise<QueueStatsRow[]>;
  providerStats(): Promise<ProviderStatsRow[]>;
}

// ---- errors

export interface HTTPAnswer {
  status: number;
  headers: Record<string, string>;
  /** snake_case, as on the wire: {error, sqlstate, message, job_id?, attempt_id?, state?, deadline?} */
  body: {
    error: string;
    sqlstate: string | null;
    message: string;
    job_id?: string;
    attempt_id?: string;
    state?: string;
    deadline?: string;
  };
}

export class IdemjobError extends Error {
  static readonly status: number;
  /** undefined for a connection lost with no SQLSTATE */
  readonly sqlstate: string | undefined;
  readonly detail: string | undefined;
  readonly hint: string | undefined;
  readonly table: string | undefined;
  /** the call that failed */
  readonly call: string | undefined;
  /** every key=value pair of the error's fields */
  readonly fields: Record<string, string>;
  readonly jobId?: string;
  readonly attemptId?: string;
  readonly state?: string;
  readonly deadline?: Date;
  readonly deadlineText?: string;
  /** seconds (IJ002) */
  readonly retryAfter?: number;
  readonly condition: string;
  readonly status: number;
  toHTTP(): HTTPAnswer;
}
/** IJ001, 409 */
export class IdempotencyConflict extends IdemjobError {}
/** IJ002, 409 + Retry-After */
export class AttemptInDoubt extends IdemjobError {}
/** IJ003, 409 */
export class JobFinished extends IdemjobError {}
/** IJ004, 422 */
export class ProviderNotCertified extends IdemjobError {}
/** IJ005, 409 */
export class InvalidTransition extends IdemjobError {}
/** IJ006, 404 */
export class NotFound extends IdemjobError {}
/** IJ007, 410 */
export class KeyExpired extends IdemjobError {}
/** IJ008, 409 */
export class LeaseExpired extends IdemjobError {}
/** 22xxx, 42602, 42704: 400 */
export class InvalidArgument extends IdemjobError {}
/** 42501: 403 */
export class PermissionDenied extends IdemjobError {}
/** 40001, 40P01, 55P03: 503; nothing was written, the client sends any call again */
export class RetryTransaction extends IdemjobError {}
/** 25006, 55000, 53xxx, 57014: 503 */
export class Unavailable extends IdemjobError {}
/** no SQLSTATE, 08xxx, 57P0x: 503; the call is in doubt (sent: false when it never left) */
export class ConnectionLost extends IdemjobError {
  readonly sent?: boolean;
  readonly injected?: boolean;
  readonly errno?: string;
}

export function classFor(sqlstate: string | undefined): typeof IdemjobError;
export function parseFields(constraint: string): Record<string, string>;
export function parseDSN(dsn: string): Record<string, string>;
export function toPgConfig(kv: Record<string, string>): PgPoolConfig;
/** JSON text for a jsonb argument; BigInts become exact JSON numbers. */
export function toJson(value: unknown): string;

/** Thrown by a handler for a definite failure: the worker calls failAttempt(error, retryable). */
export class Failure extends Error {
  constructor(error?: Json | string, retryable?: boolean);
  readonly error: Json;
  readonly retryable: boolean;
}

// ---- the worker

export interface HandlerContext {
  /** the provider to call: the server chose it (failover by route) */
  provider: string;
  /** when the worker stops waiting and marks the attempt unknown (local clock) */
  deadline: Date;
  attemptId: string;
  jobId: string;
  attemptNo: number;
  worker: string;
  /** aborted when the worker stops past its grace, or the server ended the attempt (a heartbeat refused) */
  signal: AbortSignal;
}

export type Handler = (job: ClaimedAttempt, ctx: HandlerContext) => Promise<Json | undefined> | Json | undefined;

export interface WorkerCounters {
  claimed: number;
  skipped: number;
  won: number;
  lost: number;
  rejected: number;
  failed: number;
  inDoubt: number;
  late: number;
  errors: number;
}

export type WorkerEvent =
  | 'started' | 'claiming' | 'claimed' | 'not_begun' | 'skipped' | 'begun' | 'heartbeat' | 'heartbeat_refused'
  | 'answered' | 'completed' | 'failed' | 'gave_up' | 'unknown' | 'late' | 'late_error' | 'error' | 'stopped';

export interface WorkerOptions {
  client: Client;
  /** this worker across restarts: one running process per name */
  name: string;
  handlers: Record<string, Handler>;
  /** handlers at once (1) */
  concurrency?: number;
  /** ms: the attempt's timeout and the handler's deadline (30000) */
  timeout?: number;
  /** ms: how long one claim waits in the server for a job (5000) */
  wait?: number;
  /** ms between heartbeats (timeout / 3; 0: none) */
  heartbeat?: number;
  /** the intents claimed (the handlers' keys) */
  intents?: string[];
  /** ms to wait after a failed claim (1000) */
  errorBackoff?: number;
  onEvent?: (name: WorkerEvent, fields: Record<string, unknown>) => void;
}

export class Worker {
  constructor(options: WorkerOptions);
  readonly counters: WorkerCounters;
  readonly name: string;
  /** attempts claimed and not yet reported (late handlers not counted) */
  readonly busy: number;
  /** abandonAttempts(name), then the loop runs; resolves to how many were abandoned */
  start(): Promise<number>;
  /** stops; resolves to what abandonAttempts gave up */
  stop(options?: { grace?: number }): Promise<number>;
}
