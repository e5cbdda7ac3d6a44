// Apollo Client against the server: a feed paged with relayStylePagination
// into one cached list, subscriptions over graphql-ws and over multipart
// HTTP, and automatic persisted queries.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { relayStylePagination } from '@apollo/client/utilities';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import {
  eventually, feedTexts, identity, logVersions, postStatus, startServer, waitForFeed, within,
  waitForLiveTopics, waitForNoLiveTopics,
} from './server.mjs';

logVersions('apollo.test.mjs', ['@apollo/client', 'graphql', 'graphql-ws', 'ws', 'rxjs']);

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

const FEED_PAGE = gql`
  query FeedPage($first: Int!, $after: String) {
    feed(first: $first, after: $after) {
      edges { cursor node { actionId action { id descriptor { ... on StatusPost { text } } } } }
      pageInfo { hasNextPage endCursor }
    }
  }
`;

const FEED_EVENTS = gql`
  subscription FeedEvents {
    feedEvents { kind item { actionId action { descriptor { ... on StatusPost { text } } } } }
  }
`;

function httpClient(user, options = {}) {
  return new ApolloClient({
    link: new HttpLink({ uri: `${server.base}/graphql`, headers: identity(user), ...options }),
    cache: new InMemoryCache(),
  });
}

/** Subscribes with `client` and resolves with the first ADDED event of a
 * status whose text is `text`, posted by `user` once the server holds the
 * subscription; rejects on an error or a stream that ends first. */
async function addedOnce(client, user, text) {
  await waitForNoLiveTopics(server.base);
  let subscription;
  const added = new Promise((resolveEvent, reject) => {
    subscription = client.subscribe({ query: FEED_EVENTS }).subscribe({
      next: (result) => {
        if (result.error) reject(result.error);
        const event = result.data?.feedEvents;
        if (event?.kind === 'ADDED' && event.item.action?.descriptor?.text === text) resolveEvent(event);
      },
      error: reject,
      complete: () => reject(new Error('the subscription ended before the event came')),
    });
  });
  try {
    // A subscription refused fails here, with the server's reason.
    added.catch(() => {});
    await Promise.race([waitForLiveTopics(server.base, 1), added]);
    await postStatus(server.base, user, text);
    return await within(`the ADDED event of "${text}"`, added);
  } finally {
    subscription.unsubscribe();
  }
}

test('a feed paged with fetchMore gathers every page in one cached list', async () => {
  const texts = ['one', 'two', 'three', 'four', 'five'].map((n) => `apollo page ${n}`);
  for (const text of texts) await postStatus(server.base, 'alice', text);
  await waitForFeed(server.base, 'alice', texts);
  const expected = await feedTexts(server.base, 'alice');

  const client = new ApolloClient({
    link: new HttpLink({ uri: `${server.base}/graphql`, headers: identity('alice') }),
    cache: new InMemoryCache({ typePolicies: { Query: { fields: { feed: relayStylePagination() } } } }),
  });
  const first = await client.query({ query: FEED_PAGE, variables: { first: 2 } });
  assert.equal(first.data.feed.edges.length, 2);
  const watched = client.watchQuery({ query: FEED_PAGE, variables: { first: 2 } });
  const pages = [];
  const watching = watched.subscribe((result) => { if (result.data) pages.push(result.data); });
  try {
    let last = first.data.feed;
    for (let page = 2; page <= 3; page++) {
      const more = await watched.fetchMore({ variables: { after: last.pageInfo.endCursor } });
      last = more.data.feed;
    }
    assert.equal(last.pageInfo.hasNextPage, false, 'five items fill three pages of two');
    // The watcher hears of the merged list after fetchMore resolves.
    const { feed: merged } = await eventually('the watcher to see every page', () =>
      pages.find((data) => data.feed.edges.length >= texts.length));
    const mergedTexts = merged.edges.map((edge) => edge.node.action.descriptor.text);
    assert.deepEqual(mergedTexts, expected, 'all pages, in the order of the feed');
    assert.deepEqual(mergedTexts.slice().sort(), texts.slice().sort(), 'each item once');
    const ids = merged.edges.map((edge) => edge.node.actionId);
    assert.equal(new Set(ids).size, ids.length, 'no item twice');
    assert.equal(merged.pageInfo.hasNextPage, false);
    assert.equal(merged.pageInfo.endCursor, last.pageInfo.endCursor, 'pageInfo of the last page');
  } finally {
    watching.unsubscribe();
    client.stop();
  }
});

test('a subscription over graphql-ws receives an ADDED event for a new post', async () => {
  const ws = createClient({
    url: `${server.base.replace(/^http/, 'ws')}/graphql/ws`,
    webSocketImpl: WebSocket,
    connectionParams: identity('wendy'),
    retryAttempts: 0,
  });
  const client = new ApolloClient({ link: new GraphQLWsLink(ws), cache: new InMemoryCache() });
  try {
    const event = await addedOnce(client, 'wendy', 'apollo over graphql-ws');
    assert.ok(event.item.actionId);
  } finally {
    client.stop();
    await ws.dispose();
  }
});

test('a subscription over multipart HTTP receives an ADDED event for a new post', async () => {
  const accepts = [];
  const client = httpClient('mona', {
    fetch: (url, init) => {
      accepts.push(new Headers(init.headers).get('accept'));
      return fetch(url, init);
    },
  });
  try {
    const event = await addedOnce(client, 'mona', 'apollo over multipart');
    assert.ok(event.item.actionId);
    assert.match(accepts[0], /^multipart\/mixed/, 'the subscription went as a multipart request');
  } finally {
    client.stop();
  }
});

test('automatic persisted queries: the hash alone once the server has the query', async () => {
  const exchanges = [];
  const recording = async (url, init) => {
    const sent = JSON.parse(init.body);
    const response = await fetch(url, init);
    exchanges.push({ sent, answer: await response.clone().json() });
    return response;
  };
  const sha256 = (text) => createHash('sha256').update(text).digest('hex');
  const client = new ApolloClient({
    link: new PersistedQueryLink({ sha256 }).concat(
      new HttpLink({ uri: `${server.base}/graphql`, headers: identity('alice'), fetch: recording }),
    ),
    cache: new InMemoryCache(),
  });
  const VIEWER = gql`query Viewer { viewer { id } }`;
  try {
    const once = await client.query({ query: VIEWER, fetchPolicy: 'network-only' });
    assert.ok(once.data.viewer.id);
    assert.equal(exchanges.length, 2, JSON.stringify(exchanges));
    const [miss, retry] = exchanges;
    const hash = miss.sent.extensions?.persistedQuery?.sha256Hash;
    assert.match(hash ?? '', /^[0-9a-f]{64}$/);
    assert.equal(miss.sent.query, undefined, 'the first request carries the hash only');
    assert.equal(miss.answer.errors?.[0]?.message, 'PersistedQueryNotFound');
    assert.equal(miss.answer.errors?.[0]?.extensions?.code, 'PERSISTED_QUERY_NOT_FOUND');
    assert.equal(retry.sent.query.includes('viewer'), true, 'the retry carries the query');
    assert.equal(retry.sent.extensions.persistedQuery.sha256Hash, hash);
    assert.equal(hash, sha256(retry.sent.query), 'the hash is of the query sent');
    assert.equal(retry.answer.errors, undefined);

    const again = await client.query({ query: VIEWER, fetchPolicy: 'network-only' });
    assert.deepEqual(again.data, once.data);
    assert.equal(exchanges.length, 3);
    assert.equal(exchanges[2].sent.query, undefined, 'the second run goes by hash only');
    assert.equal(exchanges[2].sent.extensions.persistedQuery.sha256Hash, hash);
    assert.deepEqual(exchanges[2].answer.data, retry.answer.data);
  } finally {
    client.stop();
  }
});
