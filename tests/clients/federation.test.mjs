// Riverfeed as a subgraph of a supergraph: `serve --federation` beside a
// small product service that owns `User.email` and the applicants, composed
// and served by Hive Gateway. Feed queries and a live subscription through
// the gateway join Riverfeed's actions with the product's emails, and an
// applicant of the product's carries its activity from Riverfeed.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';

import { buildSubgraphSchema } from '@apollo/subgraph';
import { createGatewayRuntime } from '@graphql-hive/gateway-runtime';
import { composeServices } from '@theguild/federation-composition';
import { graphql, parse } from 'graphql';

import { PATIENCE, gql, identity, postStatus, startServer } from './server.mjs';

/** The product's own service: it owns the users' emails and the applicants. */
const USERS_SDL = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
  type User @key(fields: "userId") {
    userId: String!
    email: String
  }
  type Applicant @key(fields: "id") {
    id: ID!
    name: String!
  }
  type Query { applicant(id: ID!): Applicant }
`;

function startUserService() {
  const schema = buildSubgraphSchema([{
    typeDefs: parse(USERS_SDL),
    resolvers: {
      Query: { applicant: (_, { id }) => ({ id, name: `Applicant ${id}` }) },
      User: {
        __resolveReference: ({ userId }) => ({ userId, email: `${userId}@example.com` }),
      },
      Applicant: {
        __resolveReference: ({ id }) => ({ id, name: `Applicant ${id}` }),
      },
    },
  }]);
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const { query, variables, operationName } = JSON.parse(body || '{}');
    const result = await graphql({ schema, source: query, variableValues: variables, operationName });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(result));
  });
  return listen(server);
}

function listen(server) {
  return new Promise((done) => {
    server.listen(0, '127.0.0.1', () => {
      done({ base: `http://127.0.0.1:${server.address().port}`, server });
    });
  });
}

let riverfeed;
let users;
let gateway;
let gatewayServer;

before(async () => {
  riverfeed = await startServer(['--federation', '--federation-entity', 'Applicant=id']);
  users = await startUserService();
  // The subgraph SDL as a gateway's composition reads it: `_service`.
  const { _service } = await gql(riverfeed.base, 'alice', '{ _service { sdl } }');
  const composed = composeServices([
    { name: 'riverfeed', typeDefs: parse(_service.sdl), url: `${riverfeed.base}/graphql` },
    { name: 'users', typeDefs: parse(USERS_SDL), url: `${users.base}/graphql` },
  ]);
  assert.equal(composed.errors, undefined, JSON.stringify(composed.errors));
  gateway = createGatewayRuntime({
    supergraph: composed.supergraphSdl,
    logging: false,
    // Riverfeed's identity headers (dev mode) go with every subgraph request.
    propagateHeaders: {
      fromClientToSubgraphs: ({ request }) => ({
        'x-riverfeed-tenant': request.headers.get('x-riverfeed-tenant'),
        'x-riverfeed-user': request.headers.get('x-riverfeed-user'),
      }),
    },
  });
  gatewayServer = await listen(createServer(gateway));
  await gql(riverfeed.base, 'bob', 'mutation { upsertUser(input: {userId: "bob", name: "Bob"}) { userId } }');
  await gql(riverfeed.base, 'alice', 'mutation { follow(userId: "bob") }');
});

after(async () => {
  gatewayServer?.server.close();
  await gateway?.dispose?.();
  users?.server.close();
  await riverfeed?.stop();
});

/** A query through the gateway as `user`; its data (no error allowed). */
async function throughGateway(user, query) {
  const response = await fetch(`${gatewayServer.base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...identity(user) },
    body: JSON.stringify({ query }),
  });
  const body = await response.json();
  assert.equal(body.errors, undefined, JSON.stringify(body.errors));
  return body.data;
}

test('a feed through the gateway joins the actor with the user service', async () => {
  const { recordAction } = await gql(
    riverfeed.base,
    'bob',
    'mutation { recordAction(input: {descriptor: {statusPost: {text: "Shipped the gateway"}}}) { actionId } }',
  );
  const id = recordAction.actionId;
  const deadline = Date.now() + PATIENCE;
  let edges = [];
  while (Date.now() < deadline) {
    const data = await throughGateway(
      'alice',
      '{ feed(first: 5) { edges { node { action { actionId actorId actor { userId email } descriptor { ... on StatusPost { text } } } } } } }',
    );
    edges = data.feed.edges;
    if (edges.some((e) => e.node.action.actionId === id)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const item = edges.find((e) => e.node.action.actionId === id);
  assert.ok(item, `bob's status reached alice's feed: ${JSON.stringify(edges)}`);
  assert.deepEqual(item.node.action.actor, { userId: 'bob', email: 'bob@example.com' });
  assert.equal(item.node.action.descriptor.text, 'Shipped the gateway');

  // `Action` is an entity too: the gateway's lookup by `actionId` answers
  // by the rules of `action` (Riverfeed's own `_entities`, as the caller).
  const { _entities } = await gql(
    riverfeed.base,
    'alice',
    `{ _entities(representations: [{__typename: "Action", actionId: "${id}"}]) { ... on Action { actorId } } }`,
  );
  assert.deepEqual(_entities, [{ actorId: 'bob' }]);
});

test("the product's applicant carries its activity from Riverfeed", async () => {
  const { recordAction } = await gql(
    riverfeed.base,
    'bob',
    'mutation { recordAction(input: {descriptor: {statusPost: {text: "Met Mary"}}, refIds: ["app-1"]}) { actionId } }',
  );
  const data = await throughGateway(
    'alice',
    '{ applicant(id: "app-1") { name activity(first: 5) { edges { node { actionId actor { email } descriptor { ... on StatusPost { text } } } } } } }',
  );
  assert.equal(data.applicant.name, 'Applicant app-1');
  assert.deepEqual(data.applicant.activity.edges, [
    {
      node: {
        actionId: recordAction.actionId,
        actor: { email: 'bob@example.com' },
        descriptor: { text: 'Met Mary' },
      },
    },
  ]);
});

test('a subscription through the gateway carries the joined fields', async () => {
  const controller = new AbortController();
  const response = await fetch(`${gatewayServer.base}/graphql`, {
    method: 'POST',
    signal: controller.signal,
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...identity('alice') },
    body: JSON.stringify({
      query:
        'subscription { feedEvents { kind item { action { actor { userId email } descriptor { ... on StatusPost { text } } } } } }',
    }),
  });
  assert.equal(response.status, 200);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  // Posts until an event arrives: the subscription reaches Riverfeed
  // asynchronously, so an early post may precede it.
  let buffered = '';
  let event;
  const deadline = Date.now() + PATIENCE;
  const poster = (async () => {
    for (let i = 0; !event && Date.now() < deadline; i++) {
      await postStatus(riverfeed.base, 'bob', `live ${i}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  while (!event && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    for (const block of buffered.split('\n\n')) {
      const data = block.split('\n').find((l) => l.startsWith('data:'));
      if (!data) continue;
      const parsed = JSON.parse(data.slice(5));
      if (parsed?.data?.feedEvents) {
        event = parsed;
        break;
      }
      assert.equal(parsed.errors, undefined, JSON.stringify(parsed.errors));
    }
  }
  controller.abort();
  await poster;
  assert.ok(event, `an event came through the gateway: ${buffered}`);
  const { kind, item } = event.data.feedEvents;
  assert.equal(kind, 'ADDED');
  assert.deepEqual(item.action.actor, { userId: 'bob', email: 'bob@example.com' });
  assert.match(item.action.descriptor.text, /^live \d+$/);
});
