// The web demo in a real browser: two people on two pages of
// `riverfeed serve --demo`. B comments on an old action about an applicant A
// is assigned to; A's page must move that card to the top, live, saying why.
//
// Run by tests/run. Needs RIVERFEED_BIN (the binary to test) and Debian's
// Chromium at /usr/bin/chromium (CHROMIUM overrides).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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

let server;
let base;
let browser;
const scratch = [];

/** Starts the server (on a free port unless `listen` says) and resolves with
 * its base URL once it listens (it seeds the demo tenant before that). */
function startServer(dataDir, listen = '127.0.0.1:0') {
  const child = spawn(BIN, ['serve', '--demo', '--data-dir', dataDir, '--listen', listen], {
    env: { ...process.env, RUST_LOG: 'info', NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not listen in time:\n${log}`)), 30_000);
    const read = (chunk) => {
      // Strip colours in case the logger adds them anyway.
      log += chunk.toString().replace(/\u001b\[[0-9;]*m/g, '');
      const match = log.match(/riverfeed listening.*?addr=(127\.0\.0\.1:\d+)/);
      if (match) {
        clearTimeout(timer);
        resolvePromise({ child, dataDir, base: `http://${match[1]}`, log: () => log });
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

async function gql(user, query, variables = {}) {
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-riverfeed-tenant': 'demo', 'x-riverfeed-user': user },
    body: JSON.stringify({ query, variables }),
  });
  const body = await response.json();
  assert.equal(body.errors, undefined, JSON.stringify(body.errors));
  return body.data;
}

/** A page that records every console error, page error and request that
 * does not go to our server. */
async function openPage(name, path) {
  const page = await browser.newPage();
  const problems = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`${name} console error: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`${name} page error: ${error.message}`));
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(base) && !url.startsWith('data:')) problems.push(`${name} left the server: ${url}`);
  });
  await page.goto(`${base}${path}`);
  await page.locator('[data-testid=live-status][data-state=live]').waitFor({ timeout: PATIENCE });
  return { page, problems };
}

async function stopServer() {
  const exited = new Promise((done) => server.child.once('exit', done));
  server.child.kill('SIGTERM');
  await exited;
}

before(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'riverfeed-demo-data-'));
  scratch.push(dataDir);
  const started = await startServer(dataDir);
  server = started;
  base = started.base;
  const profile = mkdtempSync(join(tmpdir(), 'riverfeed-demo-chromium-'));
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
  if (server && server.child.exitCode === null) await stopServer();
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

const FEED = `{ feed(first: 20) { edges { node { actionId reason { kind }
  action { actorId scope refIds conducted descriptor { __typename } } } } } }`;

/**
 * A, B and the action: A is assigned to an applicant; the action is public,
 * refers to that applicant, is old, and sits in A's first page of feed but
 * not on top. B is someone else, in another department, not assigned to it.
 */
async function pickScenario(roster) {
  const dayAgo = Date.now() - 24 * 3600 * 1000;
  for (const a of roster.users) {
    const applicants = a.assignments.filter((id) => id.startsWith('applicant-'));
    if (!applicants.length) continue;
    const edges = (await gql(a.id, FEED)).feed.edges;
    for (const [index, { node }] of edges.entries()) {
      const ref = node.action && node.action.refIds.find((id) => applicants.includes(id));
      if (index < 3 || !ref || node.action.scope !== 'PUBLIC' || node.action.actorId === a.id) continue;
      if (Date.parse(node.action.conducted) > dayAgo) continue;
      const b = roster.users.find((u) => u.department !== a.department && !u.assignments.includes(ref));
      return { a, b, ref, actionId: node.actionId, index };
    }
  }
  throw new Error('no old public action about an assigned applicant in any first page');
}

test('a comment on one page bumps the card to the top of another, live', async () => {
  const roster = await (await fetch(`${base}/demo/roster.json`)).json();
  assert.equal(roster.seeded, true);
  const { a, b, ref, actionId, index } = await pickScenario(roster);
  console.log(`A = ${a.id}, B = ${b.id}, action ${actionId} (#${index + 1} in A's feed) about ${ref}`);

  const pageA = await openPage('A', `/demo/?user=${a.id}`);
  const pageB = await openPage('B', `/demo/?user=${b.id}#/ref/${ref}`);

  const cardA = pageA.page.locator(`[data-testid=feed-card][data-action-id="${actionId}"]`);
  await cardA.waitFor({ timeout: PATIENCE });
  const firstA = pageA.page.locator('[data-testid=feed-card]').first();
  assert.notEqual(await firstA.getAttribute('data-action-id'), actionId, 'not on top before');
  const commentsBefore = Number(await cardA.locator('[data-testid=comment-count]').textContent());
  // Marks this document: a reload would lose it.
  await pageA.page.evaluate(() => { window.stillTheSamePage = true; });

  // B opens the thread of that action in the applicant's slice and comments.
  const cardB = pageB.page.locator(`[data-testid=slice-card][data-action-id="${actionId}"]`);
  await cardB.waitFor({ timeout: PATIENCE });
  await cardB.locator('[data-testid=comments-toggle]').click();
  const input = cardB.locator('[data-testid=comment-input]');
  await input.waitFor({ timeout: PATIENCE });
  const text = `Let's fast-track this one (${Date.now()})`;
  await input.fill(text);
  const answered = pageB.page.waitForResponse((response) => response.url().endsWith('/graphql')
    && (response.request().postData() || '').includes('mutation Comment'));
  const clicked = Date.now();
  await cardB.locator('[data-testid=comment-submit]').click();
  await answered;
  const answeredAfter = Date.now() - clicked;

  await pageA.page.waitForFunction(({ id }) => {
    const top = document.querySelector('[data-testid=feed-card]');
    const reason = top && top.querySelector('[data-testid=feed-reason]');
    return top && top.dataset.actionId === id && reason
      && reason.dataset.reasonKind === 'BUMPED' && reason.dataset.bumpRule === 'ASSIGNED';
  }, { id: actionId }, { timeout: PATIENCE, polling: 'raf' });
  const latency = Date.now() - clicked;
  console.log(`bump latency: ${latency} ms from B's comment click to the card on top of A's page`
    + ` (the comment request itself: ${answeredAfter} ms)`);

  assert.equal(await pageA.page.evaluate(() => window.stillTheSamePage), true, 'A did not reload');
  const reason = firstA.locator('[data-testid=feed-reason]');
  assert.match(await reason.textContent(), new RegExp(`bumped: ASSIGNED by ${b.name}`));
  assert.equal(await firstA.locator('[data-testid=comment-count]').textContent(), String(commentsBefore + 1));
  assert.equal(await pageA.page.locator(`[data-testid=feed-card][data-action-id="${actionId}"]`).count(), 1,
    'one card per action');
  await cardB.locator('[data-testid=comment]', { hasText: text }).waitFor({ timeout: PATIENCE });

  mkdirSync(ARTIFACTS, { recursive: true });
  await pageA.page.screenshot({ path: join(ARTIFACTS, 'demo-bumped.png') });
  await pageB.page.screenshot({ path: join(ARTIFACTS, 'demo-slice.png') });

  // A likes the card (or takes back a like from the seeded month); B posts
  // a status that arrives on both feeds.
  const like = firstA.locator('[data-testid=like-button]');
  const likes = Number(await like.locator('[data-testid=like-count]').textContent());
  const liked = (await like.getAttribute('aria-pressed')) === 'true';
  await like.click();
  await pageA.page.waitForFunction(({ id, pressed, count }) => {
    const el = document.querySelector(`[data-testid=feed-card][data-action-id="${id}"] [data-testid=like-button]`);
    return el && el.getAttribute('aria-pressed') === pressed
      && el.querySelector('[data-testid=like-count]').textContent === count;
  }, { id: actionId, pressed: String(!liked), count: String(liked ? likes - 1 : likes + 1) }, { timeout: PATIENCE });

  await pageB.page.locator('[data-testid=back-to-feed]').click();
  await pageB.page.locator('[data-testid=feed-view]').waitFor({ timeout: PATIENCE });
  const status = `Demo day went great (${Date.now()})`;
  await pageB.page.locator('[data-testid=status-input]').fill(status);
  await pageB.page.locator('[data-testid=post-status]').click();
  // B's comment may have raised an item of B's own feed above "now"
  // (PARTICIPATED), so the post is near the top rather than on it.
  await pageB.page.locator('[data-testid=feed-card]', { hasText: status }).waitFor({ timeout: PATIENCE });
  if (a.department === 'dept-recruiting') {
    // Recruiters follow everyone, so A gets B's public post too.
    await pageA.page.locator('[data-testid=feed-card]', { hasText: status }).waitFor({ timeout: PATIENCE });
  }

  // Scrolling loads older pages until every kind of card has shown up.
  const kinds = ['StatusPost', 'ApplicationRating', 'NewApplicant', 'ApplicantHired', 'ApplicantRatingRequested'];
  await pageA.page.waitForFunction((wanted) => {
    window.scrollTo(0, document.body.scrollHeight);
    const seen = new Set(Array.from(document.querySelectorAll('[data-testid=feed-card]'), (c) => c.dataset.type));
    return wanted.every((k) => seen.has(k)) && document.querySelectorAll('[data-testid=feed-card]').length > 20;
  }, kinds, { timeout: PATIENCE, polling: 250 });
  const ids = await pageA.page.$$eval('[data-testid=feed-card]', (cards) => cards.map((c) => c.dataset.actionId));
  assert.equal(new Set(ids).size, ids.length, 'no action shown twice');

  assert.deepEqual([...pageA.problems, ...pageB.problems], []);
});

test('a page reconnects after a server restart and goes on live', async () => {
  const { page, problems } = await openPage('C', '/demo/?user=rita');
  await page.locator('[data-testid=feed-card]').first().waitFor({ timeout: PATIENCE });
  const listen = base.replace('http://', '');
  await stopServer();
  await page.locator('[data-testid=live-status][data-state=offline]').waitFor({ timeout: PATIENCE });
  server = await startServer(server.dataDir, listen);
  await page.locator('[data-testid=live-status][data-state=live]').waitFor({ timeout: PATIENCE });
  // The restarted server seeds nothing and refuses the old resume cursor;
  // the page starts its stream over and a new post still arrives live.
  const text = `Back after the restart (${Date.now()})`;
  await gql('carol', 'mutation($text: String!) { recordAction(input: {descriptor: {statusPost: {text: $text}}}) { actionId } }',
    { text });
  await page.locator('[data-testid=feed-card]', { hasText: text }).waitFor({ timeout: PATIENCE });
  // Chromium itself reports the refused connections while the server was down.
  const unexpected = problems.filter((p) => !/WebSocket connection to .* failed/.test(p));
  assert.deepEqual(unexpected, []);
});
