// A worker process that kills itself (SIGKILL: no cleanup, no goodbye to
// the server) at one point of its loop; test/kill.test.js runs it.
//   node kill_worker.js <point> <worker name> <intent> <dsn>
// points: p1 waiting in claim, p2 after claim before beginAttempt, p3 after
// beginAttempt before the handler, p4 in the handler, p5 after the handler
// answered before completeAttempt (op: as p3).
import { connect, Worker } from '../index.js';

const [point, name, intent, dsn] = process.argv.slice(2);
const die = () => process.kill(process.pid, 'SIGKILL');
const client = connect(dsn, { applicationName: `ijt-kill-${point}` });
const worker = new Worker({
  client,
  name,
  timeout: 1000,
  wait: point === 'p1' ? 5000 : 1000,
  handlers: {
    [intent]: async (job, ctx) => {
      if (point === 'p4') die();
      return { by: ctx.provider };
    },
  },
  onEvent(event) {
    process.stdout.write(`${event}\n`);
    if (point === 'p1' && event === 'claiming') setTimeout(die, 400);
    if (point === 'p2' && event === 'claimed') die();
    if ((point === 'p3' || point === 'op') && event === 'begun') die();
    if (point === 'p5' && event === 'answered') die();
  },
});
await worker.start();
setTimeout(() => { process.stdout.write('never reached its point\n'); process.exit(3); }, 15000);
