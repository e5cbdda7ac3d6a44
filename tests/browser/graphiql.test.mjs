// GraphiQL in a real browser, with every request to another host aborted:
// it must load from the server alone, run a query, switch users with the
// identity picker, and carry a bearer token over HTTP and the websocket.
//
// Run by tests/run. Needs RIVERFEED_BIN (the binary to test) and Debian's
// Chromium at /usr/bin/chromium (CHROMIUM overrides).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = process.env.RIVERFEED_BIN || join(ROOT, 'target/debug/riverfeed');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = join(ROOT, '.build/artifacts');
/** How long any one condition may take to come true. */
const PATIENCE = 15_000;
/** The shared secret of the server that checks tokens. */
const SECRET = 'graphiql-browser-test-secret-0123456789';

const servers = [];
const scratch = [];
let browser;

/** Starts `riverfeed serve` with `args` on a free port; resolves with its base
 * URL once it listens. */
function startServer(args = []) {
  const dataDir = mkdtempSync(join(tmpdir(), 'riverfeed-graphiql-data-'));
  scratch.push(dataDir);
  const child = spawn(BIN, ['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0', ...args], {
    env: { ...process.env, RUST_LOG: 'info', NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  servers.push(child);
  let log = '';
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not listen in time:\n${log}`)), 30_000);
    const read = (chunk) => {
      log += chunk.toString().replace(/\u001b\[[0-9;]*m/g, '');
      const match = log.match(/riverfeed listening.*?addr=(127\.0\.0\.1:\d+)/);
      if (match) {
        clearTimeout(timer);
        resolvePromise(`http://${match[1]}`);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited with ${code}:\n${log}`));
    });
  });
}

async function gql(base, headers, query, variables = {}) {
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  assert.equal(body.errors, undefined, JSON.stringify(body.errors));
  return body.data;
}

/** A page on which any request to a host other than this machine's loopback
 * is aborted and noted, as are console errors (a refused policy among them)
 * and page errors. */
async function openGraphiql(base, path) {
  const page = await browser.newPage();
  const problems = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  await page.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === '127.0.0.1') return route.continue();
    problems.push(`left the server: ${url}`);
    return route.abort();
  });
  await page.goto(`${base}${path}`);
  await page.locator('.graphiql-execute-button').waitFor({ timeout: PATIENCE });
  return { page, problems };
}

/** Runs what the query editor holds and waits for a response holding `wanted`. */
async function run(page, wanted) {
  await page.locator('.graphiql-execute-button').click();
  await page.waitForFunction((text) => {
    const result = document.querySelector('.result-window');
    return result && result.textContent.includes(text);
  }, wanted, { timeout: PATIENCE });
}

/** Replaces the query editor's text (GraphiQL's editors are CodeMirror 5)
 * and waits until GraphiQL parsed it (it does so a moment after a change, and
 * picks HTTP or the websocket by what it parsed). */
async function setQuery(page, query, operation) {
  await page.evaluate((text) => {
    document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.setValue(text);
  }, query);
  await page.waitForFunction((wanted) => {
    const editor = document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror;
    return editor.documentAST?.definitions?.[0]?.operation === wanted;
  }, operation, { timeout: PATIENCE });
}

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'riverfeed-graphiql-chromium-'));
  scratch.push(profile);
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
});

after(async () => {
  if (browser) await browser.close();
  for (const child of servers) {
    if (child.exitCode === null) {
      const exited = new Promise((done) => child.once('exit', done));
      child.kill('SIGTERM');
      await exited;
    }
  }
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

test('GraphiQL runs from the server alone and switches users with the picker', async () => {
  const base = await startServer();
  await gql(base, { 'x-riverfeed-tenant': 'acme', 'x-riverfeed-user': 'alice' },
    'mutation { upsertUser(input: {userId: "alice", name: "Alice Adams"}) { id } }');
  await gql(base, { 'x-riverfeed-tenant': 'acme', 'x-riverfeed-user': 'bob' },
    'mutation { upsertUser(input: {userId: "bob", name: "Bob Builder"}) { id } }');

  const { page, problems } = await openGraphiql(base, '/graphiql?tenant=acme&user=alice');
  assert.equal(await page.getByTestId('tenant').inputValue(), 'acme');
  assert.equal(await page.getByTestId('user').inputValue(), 'alice');
  // The default query asks who you are.
  await run(page, 'Alice Adams');
  // A dialog adds a style of its own, which the page's policy must let in.
  await page.getByLabel('Open settings dialog').click();
  await page.getByRole('dialog').waitFor({ timeout: PATIENCE });
  await page.keyboard.press('Escape');
  await page.getByRole('dialog').waitFor({ state: 'detached', timeout: PATIENCE });

  const user = page.getByTestId('user');
  await user.fill('bob');
  await user.press('Tab');
  await run(page, 'Bob Builder');
  assert.match(page.url(), /user=bob/);
  await page.screenshot({ path: join(ARTIFACTS, 'graphiql-bob.png') });

  // The pick is remembered without the address saying it.
  await page.goto(`${base}/graphiql`);
  await page.locator('.graphiql-execute-button').waitFor({ timeout: PATIENCE });
  assert.equal(await page.getByTestId('user').inputValue(), 'bob');
  await run(page, 'Bob Builder');
  assert.deepEqual(problems, []);
  await page.close();
});

test('a bearer token goes on requests and in connection_init', async () => {
  const base = await startServer(['--jwt-secret', SECRET]);
  const token = execFileSync(BIN, ['token', '--tenant', 'acme', '--user', 'carol', '--secret', SECRET])
    .toString().trim();
  await gql(base, { authorization: `Bearer ${token}` },
    'mutation { upsertUser(input: {userId: "carol", name: "Carol Chen"}) { id } }');

  const { page, problems } = await openGraphiql(base, '/graphiql');
  const sent = [];
  const received = [];
  page.on('websocket', (socket) => {
    socket.on('framesent', (frame) => sent.push(JSON.parse(frame.payload)));
    socket.on('framereceived', (frame) => received.push(JSON.parse(frame.payload)));
  });
  const tokenField = page.getByTestId('token');
  await tokenField.fill(token);
  await tokenField.press('Tab');
  const request = page.waitForRequest((r) => r.url().endsWith('/graphql') && r.method() === 'POST'
    && (r.postData() || '').includes('viewer'));
  await run(page, 'Carol Chen');
  assert.equal((await request).headers().authorization, `Bearer ${token}`);

  // A subscription: the websocket says who it is with the same token, and
  // the server acknowledges it.
  await setQuery(page, 'subscription { feedEvents { kind } }', 'subscription');
  await page.locator('.graphiql-execute-button').click();
  const deadline = Date.now() + PATIENCE;
  while (!received.some((m) => m.type === 'connection_ack')) {
    assert.ok(Date.now() < deadline, `no connection_ack: sent ${JSON.stringify(sent)}, got ${JSON.stringify(received)}`);
    await new Promise((done) => setTimeout(done, 50));
  }
  const init = sent.find((m) => m.type === 'connection_init');
  assert.equal(init.payload.Authorization, `Bearer ${token}`);
  assert.deepEqual(problems, []);
  await page.close();
});
