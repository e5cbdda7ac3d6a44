// What the client tests share: a server of their own (`riverfeed serve` on
// a free port, in dev mode: identity by headers), plain requests to seed it,
// and waits that poll with a deadline.
//
// Needs RIVERFEED_BIN, the binary to test (target/debug/riverfeed otherwise).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(HERE, '../..');
const BIN = process.env.RIVERFEED_BIN || join(ROOT, 'target/debug/riverfeed');
export const TENANT = 'acme';
/** How long any one condition may take to come true (a fan-out may retry). */
export const PATIENCE = 20_000;

/** Identity headers of dev mode. */
export function identity(user, extra = {}) {
  return { 'x-riverfeed-tenant': TENANT, 'x-riverfeed-user': user, ...extra };
}

/** Starts `riverfeed serve` with `args` on a free port and resolves once it
 * listens, with its base URL and a `stop()` that also removes its data. */
export function startServer(args = []) {
  const dataDir = mkdtempSync(join(tmpdir(), 'riverfeed-clients-'));
  const child = spawn(BIN, ['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', ...args], {
    env: { ...process.env, RUST_LOG: 'info', NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const exited = new Promise((done) => child.once('exit', done));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not listen in time:\n${log}`)), 30_000);
    const read = (chunk) => {
      log += chunk.toString().replace(/\u001b\[[0-9;]*m/g, '');
      const match = log.match(/riverfeed listening.*?addr=(127\.0\.0\.1:\d+)/);
      if (match) {
        clearTimeout(timer);
        resolveStart({ base: `http://${match[1]}`, stop, log: () => log });
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited with ${code}:\n${log}`));
    });
  });
}

/** A plain GraphQL POST as `user`; the whole response body. */
export async function post(base, user, body, headers = {}) {
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...identity(user), ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** Runs `query` as `user` and returns its data; any error fails the test. */
export async function gql(base, user, query, variables = {}) {
  const { body } = await post(base, user, { query, variables });
  assert.equal(body.errors, undefined, JSON.stringify(body.errors));
  return body.data;
}

/** Posts a status as `user`. */
export async function postStatus(base, user, text) {
  await gql(
    base,
    user,
    'mutation($input: RecordActionInput!) { recordAction(input: $input) { id } }',
    { input: { descriptor: { statusPost: { text } } } },
  );
}

/** The texts of `user`'s feed, first page of up to 100, newest first. */
export async function feedTexts(base, user) {
  const data = await gql(
    base,
    user,
    '{ feed(first: 100) { edges { node { action { descriptor { ... on StatusPost { text } } } } } } }',
  );
  return data.feed.edges.map((edge) => edge.node.action?.descriptor?.text);
}

/** Polls `check` until it returns a truthy value (which it resolves with),
 * failing with `what` after `PATIENCE`. */
export async function eventually(what, check) {
  const deadline = Date.now() + PATIENCE;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last ? `: ${last.stack ?? last}` : ''}`);
    }
    await new Promise((tick) => setTimeout(tick, 50));
  }
}

/** Waits until the feed of `user` holds every one of `texts`. */
export async function waitForFeed(base, user, texts) {
  await eventually(`${user}'s feed to hold ${texts.join(', ')}`, async () => {
    const seen = await feedTexts(base, user);
    return texts.every((text) => seen.includes(text));
  });
}

/** The server's `riverfeed_live_topics` gauge. */
export async function liveTopics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('riverfeed_live_topics '));
  assert.ok(line, `no riverfeed_live_topics line in /metrics:\n${text}`);
  return Number(line.split(' ')[1]);
}

/** Waits until the server holds at least `count` live topics: a
 * subscription is registered once the gauge counts its feed. */
export async function waitForLiveTopics(base, count) {
  await eventually(`${count} live topic(s)`, async () => (await liveTopics(base)) >= count);
}

/** Waits until no live topic is left, so the next subscription's shows. */
export async function waitForNoLiveTopics(base) {
  await eventually('no live topics', async () => (await liveTopics(base)) === 0);
}

/** Logs, once, the versions of the client packages a test file uses. */
export function logVersions(file, packages) {
  const versions = packages.map((name) => {
    const manifest = JSON.parse(readFileSync(join(HERE, 'node_modules', name, 'package.json'), 'utf8'));
    return `${name}@${manifest.version}`;
  });
  console.log(`${file}: ${versions.join(' ')}`);
}

/** Resolves as `promise` does, or fails with `what` after `PATIENCE`. */
export async function within(what, promise) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), PATIENCE);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
