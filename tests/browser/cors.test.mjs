// A frontend on its own origin calling the API from a real browser: a page
// served from another port of this machine, listed in --cors-origins, runs a
// query, a mutation and an event-stream subscription and opens a websocket;
// a page on an origin that is not listed (and not this machine's, which dev
// mode lets call) is refused, and its mutation never reaches the server.
//
// Run by tests/run. Needs RIVERFEED_BIN (the binary to test) and Debian's
// Chromium at /usr/bin/chromium (CHROMIUM overrides).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from '../clients/server.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

const scratch = [];
const pageServers = [];
let riverfeed;
let browser;
let api;
let listed;
let unlisted;

/** Serves one empty page on a free loopback port: a frontend's origin. */
function pageServer() {
  const server = createServer((_, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><title>a frontend</title>');
  });
  pageServers.push(server);
  return new Promise((done) => server.listen(0, '127.0.0.1', () => done(`http://127.0.0.1:${server.address().port}`)));
}

/** Opens a page of `origin` in the browser. */
async function open(origin) {
  const page = await browser.newPage();
  await page.goto(`${origin}/`);
  return page;
}

/** Runs in the page: a GraphQL POST as alice of acme, as a frontend sends it
 * (JSON and dev mode's identity headers, so the browser sends a preflight). */
function callFrom(page, query, variables = {}) {
  return page.evaluate(async ({ api, query, variables }) => {
    try {
      const response = await fetch(`${api}/graphql`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-riverfeed-tenant': 'acme',
          'x-riverfeed-user': 'alice',
        },
        body: JSON.stringify({ query, variables }),
      });
      return { status: response.status, body: await response.json() };
    } catch (error) {
      return { failed: String(error) };
    }
  }, { api, query, variables });
}

const RECORD = 'mutation($text: String!) { recordAction(input: { descriptor: { statusPost: { text: $text } } }) { actionId } }';
const FEED = '{ feed(first: 20) { eventsCursor nodes { action { actionId } } } }';

before(async () => {
  listed = await pageServer();
  // In dev mode every page of this machine may call: the page not listed
  // comes from a name of its own, which the browser resolves to loopback.
  unlisted = (await pageServer()).replace('127.0.0.1', 'unlisted.test');
  riverfeed = await startServer(['--cors-origins', listed]);
  api = riverfeed.base;
  const profile = mkdtempSync(join(tmpdir(), 'riverfeed-cors-chromium-'));
  scratch.push(profile);
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--host-resolver-rules=MAP unlisted.test 127.0.0.1',
    ],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (riverfeed) await riverfeed.stop();
  for (const server of pageServers) server.close();
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

test('a page on a listed origin queries, mutates, subscribes and opens a websocket', async () => {
  const page = await open(listed);
  const first = await callFrom(page, FEED);
  assert.equal(first.status, 200, JSON.stringify(first));
  const { eventsCursor } = first.body.data.feed;

  const recorded = await callFrom(page, RECORD, { text: 'hello from another origin' });
  assert.equal(recorded.status, 200, JSON.stringify(recorded));
  const actionId = recorded.body.data.recordAction.actionId;

  // An event stream (graphql-sse's distinct-connections mode) from the
  // page's feed read: the new item comes, replayed or live.
  const streamed = await page.evaluate(async ({ api, eventsCursor, actionId }) => {
    const response = await fetch(`${api}/graphql`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'x-riverfeed-tenant': 'acme',
        'x-riverfeed-user': 'alice',
      },
      body: JSON.stringify({
        query: 'subscription($after: String) { feedEvents(after: $after) { kind item { action { actionId } } } }',
        variables: { after: eventsCursor },
      }),
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const deadline = Date.now() + 15_000;
    while (!text.includes(actionId) && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    await reader.cancel();
    return { status: response.status, type: response.headers.get('content-type'), text };
  }, { api, eventsCursor, actionId });
  assert.equal(streamed.status, 200);
  assert.match(streamed.type, /^text\/event-stream/);
  assert.match(streamed.text, new RegExp(`"kind":"ADDED".*"actionId":"${actionId}"`));

  const opened = await page.evaluate((url) => new Promise((done) => {
    const socket = new WebSocket(url, 'graphql-transport-ws');
    socket.onopen = () => { socket.close(); done(true); };
    socket.onerror = () => done(false);
  }), `${api.replace('http', 'ws')}/graphql/ws`);
  assert.equal(opened, true);
  await page.close();
});

test('a page on an origin not listed is refused, over HTTP and the websocket', async () => {
  const page = await open(unlisted);
  const refused = await callFrom(page, RECORD, { text: 'sent from a page not listed' });
  assert.match(refused.failed ?? '', /TypeError/, JSON.stringify(refused));
  const opened = await page.evaluate((url) => new Promise((done) => {
    const socket = new WebSocket(url, 'graphql-transport-ws');
    socket.onopen = () => { socket.close(); done(true); };
    socket.onerror = () => done(false);
  }), `${api.replace('http', 'ws')}/graphql/ws`);
  assert.equal(opened, false);
  await page.close();

  // The preflight was refused, so the mutation never ran.
  const response = await fetch(`${api}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-riverfeed-tenant': 'acme', 'x-riverfeed-user': 'alice' },
    body: JSON.stringify({ query: '{ feed(first: 20) { nodes { action { descriptor { ... on StatusPost { text } } } } } }' }),
  });
  const body = await response.json();
  assert.equal(body.errors, undefined, JSON.stringify(body.errors));
  const texts = body.data.feed.nodes.map((node) => node.action?.descriptor?.text);
  assert.ok(texts.includes('hello from another origin'), JSON.stringify(texts));
  assert.ok(!texts.includes('sent from a page not listed'), JSON.stringify(texts));
});
