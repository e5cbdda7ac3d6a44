// The web demo's notification bell in a real browser: one person on two
// pages of `riverfeed serve --demo`. Someone else likes one of their actions;
// both pages' badges go up and the open panel shows the new group on top,
// live. Reading it on one page lowers the badge of the other, live too.
//
// Run by tests/run. Needs RIVERFEED_BIN (the binary to test) and Debian's
// Chromium at /usr/bin/chromium (CHROMIUM overrides).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
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
/** The demo's files in the tree, by the path the server serves them at. */
const DEMO_FILES = new Map([
  ['/demo/', 'index.html'],
  ['/demo/app.js', 'app.js'],
  ['/demo/style.css', 'style.css'],
  ['/demo/favicon.svg', 'favicon.svg'],
]);

let server;
let base;
let browser;
const scratch = [];

/** Starts the server on a free port and resolves with its base URL once it
 * listens (it seeds the demo tenant before that). */
function startServer(dataDir) {
  const child = spawn(BIN, ['serve', '--demo', '--data-dir', dataDir, '--listen', '127.0.0.1:0'], {
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
        resolvePromise({ child, base: `http://${match[1]}`, log: () => log });
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

/**
 * The binary serves the demo files it was built with (include_str!). One
 * built before the tree's web-demo/ changed (a prebuilt binary, say) would
 * test old files. Which of them differ from the tree's?
 */
async function staleDemoFiles() {
  const stale = [];
  for (const [path, file] of DEMO_FILES) {
    // The page carries the server's descriptor selection where the file
    // holds its placeholder.
    const served = (await (await fetch(`${base}${path}`)).text()).replace(
      /(<meta name="descriptor-selection" content=")[^"]*(")/, '$1{{descriptor_selection}}$2');
    if (served !== readFileSync(join(ROOT, 'web-demo', file), 'utf8')) stale.push(file);
  }
  return stale;
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

/** Waits for the bell of `page` to say `unread`: the badge's number (no
 * badge at 0) and the button's accessible name. */
async function badgeShows(page, unread) {
  await page.waitForFunction((n) => {
    const bell = document.querySelector('[data-testid=bell]');
    const badge = document.querySelector('[data-testid=bell-badge]');
    const label = n ? `Notifications, ${n} unread` : 'Notifications, none unread';
    return bell && bell.dataset.unread === String(n) && bell.getAttribute('aria-label') === label
      && badge.hidden === (n === 0) && (n === 0 || badge.textContent === String(n))
      && (n === 0 || badge.offsetParent !== null);
  }, unread, { timeout: PATIENCE });
}

before(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'riverfeed-notices-data-'));
  scratch.push(dataDir);
  server = await startServer(dataDir);
  base = server.base;
  const stale = await staleDemoFiles();
  assert.deepEqual(stale, [], `${BIN} serves an older web demo than web-demo/: rebuild it`);
  const profile = mkdtempSync(join(tmpdir(), 'riverfeed-notices-chromium-'));
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
  if (server && server.child.exitCode === null) {
    const exited = new Promise((done) => server.child.once('exit', done));
    server.child.kill('SIGTERM');
    await exited;
  }
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

const INBOX = `{ notifications(first: 100) {
  unreadCount unseenCount
  edges { node { id reason count action { actionId } } }
  pageInfo { hasNextPage }
} }`;
const OWN = `query($id: ID!) { actorFeed(userId: $id, first: 50) {
  nodes { actionId scope descriptor { __typename } }
} }`;
const LIKED = 'query($id: ID!) { action(actionId: $id) { viewerHasLiked } }';
const LIKE = 'mutation($id: ID!) { like(actionId: $id) { likeCount } }';

/**
 * The owner, someone else and the action: the owner has unread
 * notifications (a badge to start from) and a public action with no group of
 * likes, so a like makes a new group; the other may read it and has not
 * liked it yet.
 */
async function pickScenario(roster) {
  for (const owner of roster.users) {
    const inbox = (await gql(owner.id, INBOX)).notifications;
    // All its groups fit on the panel's first page (20).
    if (!inbox.unreadCount || inbox.edges.length > 20 || inbox.pageInfo.hasNextPage) continue;
    const likeGroups = new Set(inbox.edges
      .filter(({ node }) => node.reason === 'LIKE')
      .map(({ node }) => (node.action ? node.action.actionId : null)));
    if (likeGroups.has(null)) continue; // a like group we cannot tell apart
    const own = (await gql(owner.id, OWN, { id: owner.id })).actorFeed.nodes;
    for (const action of own) {
      if (action.scope !== 'PUBLIC' || likeGroups.has(action.actionId)) continue;
      for (const other of roster.users) {
        if (other.id === owner.id) continue;
        const seen = (await gql(other.id, LIKED, { id: action.actionId })).action;
        if (seen && !seen.viewerHasLiked) return { owner, other, action, inbox };
      }
    }
  }
  throw new Error('nobody with unread notifications owns a public action without likes');
}

test('a like reaches both pages of its owner live; reading it on one lowers the badge on the other', async () => {
  const roster = await (await fetch(`${base}/demo/roster.json`)).json();
  assert.equal(roster.seeded, true);
  const { owner, other, action, inbox } = await pickScenario(roster);
  const unread = inbox.unreadCount;
  console.log(`owner = ${owner.id} (${unread} unread in ${inbox.edges.length} groups), `
    + `liker = ${other.id}, action ${action.actionId} (${action.descriptor.__typename})`);

  const one = await openPage('one', `/demo/?user=${owner.id}`);
  const two = await openPage('two', `/demo/?user=${owner.id}`);
  await badgeShows(one.page, unread);
  await badgeShows(two.page, unread);
  // Marks these documents: a reload would lose it.
  for (const { page } of [one, two]) await page.evaluate(() => { window.stillTheSamePage = true; });

  // Page one opens the panel: it lists the groups and marks them seen,
  // which page two hears of.
  const seen = one.page.waitForResponse((response) => response.url().endsWith('/graphql')
    && (response.request().postData() || '').includes('mutation MarkSeen'), { timeout: PATIENCE });
  const bell = one.page.locator('[data-testid=bell]');
  await bell.click();
  const panel = one.page.getByRole('dialog', { name: 'Notifications' });
  await panel.waitFor({ timeout: PATIENCE });
  assert.equal(await bell.getAttribute('aria-expanded'), 'true');
  assert.equal((await (await seen).json()).data.markSeen.unseenCount, 0);
  await two.page.waitForFunction(() => document.querySelector('[data-testid=bell]').dataset.unseen === '0',
    null, { timeout: PATIENCE });
  const groups = one.page.locator('[data-testid=notice-group]');
  await one.page.waitForFunction((n) => {
    const list = document.querySelector('[data-testid=notices-list]');
    return list.getAttribute('aria-busy') === 'false'
      && list.querySelectorAll('[data-testid=notice-group]').length === n;
  }, inbox.edges.length, { timeout: PATIENCE });
  assert.equal(await one.page.locator('[data-testid=notice-group].unread').count(), unread, 'one unread row per unread group');

  // Someone else likes the action, over the API.
  const liked = Date.now();
  await gql(other.id, LIKE, { id: action.actionId });
  await badgeShows(one.page, unread + 1);
  await badgeShows(two.page, unread + 1);
  await one.page.waitForFunction((id) => {
    const top = document.querySelector('[data-testid=notice-group]');
    return top && top.dataset.actionId === id && top.dataset.reason === 'LIKE' && top.dataset.read === 'false';
  }, action.actionId, { timeout: PATIENCE });
  console.log(`from the like to both badges and the group on top: ${Date.now() - liked} ms`);
  const top = groups.first();
  const line = await top.locator('[data-testid=notice-line]').textContent();
  assert.ok(line.startsWith(`${other.name} liked your `), line);
  assert.equal(await groups.count(), inbox.edges.length + 1, 'one new group, shown once');
  assert.ok(await top.locator('time').count(), 'the group says when');
  assert.ok(await top.evaluate((el) => el.classList.contains('unread')));

  mkdirSync(ARTIFACTS, { recursive: true });
  await one.page.screenshot({ path: join(ARTIFACTS, 'notifications.png') });

  // Page one reads the group: page two's badge drops by one, live.
  await top.click();
  await badgeShows(two.page, unread);
  await badgeShows(one.page, unread);
  await one.page.waitForFunction(() => {
    const top = document.querySelector('[data-testid=notice-group]');
    return top.dataset.read === 'true' && !top.classList.contains('unread');
  }, null, { timeout: PATIENCE });
  assert.ok(await panel.isVisible(), 'the panel stays open');
  assert.equal((await gql(owner.id, '{ notificationCounts { unreadCount } }')).notificationCounts.unreadCount, unread);

  // Page two opens its panel and marks all read: both badges go and page
  // one's rows follow.
  await two.page.locator('[data-testid=bell]').click();
  await two.page.locator('[data-testid=mark-all-read]').click();
  await badgeShows(one.page, 0);
  await badgeShows(two.page, 0);
  await one.page.waitForFunction(() => document.querySelectorAll('.notice-item.unread').length === 0,
    null, { timeout: PATIENCE });
  // Escape closes the panel and gives the focus back to the bell.
  await one.page.keyboard.press('Escape');
  await panel.waitFor({ state: 'hidden', timeout: PATIENCE });
  assert.equal(await one.page.evaluate(() => document.activeElement.dataset.testid), 'bell');

  for (const { page } of [one, two]) {
    assert.equal(await page.evaluate(() => window.stillTheSamePage), true, 'no reload');
  }
  assert.deepEqual([...one.problems, ...two.problems], []);
});
