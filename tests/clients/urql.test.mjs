// urql against the server: queries over fetch (GET, as urql prefers) and
// over server-sent events, and a feed subscription over graphql-sse.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, fetchExchange, gql, subscriptionExchange } from '@urql/core';
import { createClient } from 'graphql-sse';
import {
  identity, logVersions, postStatus, startServer, waitForFeed, waitForLiveTopics,
  waitForNoLiveTopics, within,
} from './server.mjs';

logVersions('urql.test.mjs', ['@urql/core', 'graphql-sse', 'graphql']);

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

/** A urql client as `user` whose subscriptions (and with `allOverSse`, every
 * operation) go over graphql-sse in distinct-connections mode; `onFetch`
 * hears of each request and its response. */
function urqlClient(user, { allOverSse = false, onFetch = () => {} } = {}) {
  const sse = createClient({
    url: `${server.base}/graphql`,
    headers: identity(user),
    retryAttempts: 0,
    fetchFn: async (url, init) => {
      const response = await fetch(url, init);
      onFetch(url, init, response);
      return response;
    },
  });
  const client = new Client({
    url: `${server.base}/graphql`,
    fetch: async (url, init) => {
      const response = await fetch(url, init);
      onFetch(url, init, response);
      return response;
    },
    fetchOptions: { headers: identity(user) },
    exchanges: [
      subscriptionExchange({
        enableAllOperations: allOverSse,
        forwardSubscription: (request) => ({
          subscribe: (sink) => ({ unsubscribe: sse.subscribe({ ...request, query: request.query ?? '' }, sink) }),
        }),
      }),
      fetchExchange,
    ],
  });
  return { client, dispose: () => sse.dispose() };
}

const FEED = gql`
  query Feed { feed(first: 10) { edges { node { actionId action { descriptor { ... on StatusPost { text } } } } } } }
`;

const FEED_EVENTS = gql`
  subscription FeedEvents {
    feedEvents { kind item { actionId action { descriptor { ... on StatusPost { text } } } } }
  }
`;

const texts = (data) => data.feed.edges.map((edge) => edge.node.action?.descriptor?.text);

test('a query over fetch reads the feed', async () => {
  await postStatus(server.base, 'ursula', 'urql over fetch');
  await waitForFeed(server.base, 'ursula', ['urql over fetch']);
  const sent = [];
  const { client, dispose } = urqlClient('ursula', {
    onFetch: (_, init, response) => sent.push({
      method: init.method ?? 'GET',
      accept: new Headers(init.headers).get('accept'),
      type: response.headers.get('content-type'),
    }),
  });
  try {
    const result = await client.query(FEED, {}, { requestPolicy: 'network-only' }).toPromise();
    assert.equal(result.error, undefined, String(result.error));
    assert.deepEqual(texts(result.data), ['urql over fetch']);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].method, 'GET', 'urql sends short queries as GET');
    // urql accepts JSON first and streams after; a query is one answer.
    assert.match(sent[0].type, /^application\/graphql-response\+json/, JSON.stringify(sent[0]));
  } finally {
    dispose();
  }
});

test('a query over server-sent events reads the feed', async () => {
  await postStatus(server.base, 'sybil', 'urql query over sse');
  await waitForFeed(server.base, 'sybil', ['urql query over sse']);
  const accepts = [];
  const { client, dispose } = urqlClient('sybil', {
    allOverSse: true,
    onFetch: (_, init, response) => accepts.push([new Headers(init.headers).get('accept'), response.headers.get('content-type')]),
  });
  try {
    const result = await within('the query over SSE', client.query(FEED, {}).toPromise());
    assert.equal(result.error, undefined, String(result.error));
    assert.deepEqual(texts(result.data), ['urql query over sse']);
    assert.equal(accepts.length, 1, 'one request');
    assert.equal(accepts[0][0], 'text/event-stream');
    assert.match(accepts[0][1], /^text\/event-stream/);
  } finally {
    dispose();
  }
});

test('a feed subscription over graphql-sse receives an ADDED event for a new post', async () => {
  const { client, dispose } = urqlClient('sam');
  await waitForNoLiveTopics(server.base);
  let subscription;
  const added = new Promise((resolveEvent, reject) => {
    subscription = client.subscription(FEED_EVENTS, {}).subscribe((result) => {
      if (result.error) reject(result.error);
      const event = result.data?.feedEvents;
      if (event?.kind === 'ADDED' && event.item.action?.descriptor?.text === 'urql over sse') resolveEvent(event);
    });
  });
  try {
    // A subscription refused fails here, with the server's reason.
    added.catch(() => {});
    await Promise.race([waitForLiveTopics(server.base, 1), added]);
    await postStatus(server.base, 'sam', 'urql over sse');
    const event = await within('the ADDED event over SSE', added);
    assert.ok(event.item.actionId);
  } finally {
    subscription.unsubscribe();
    dispose();
  }
});
