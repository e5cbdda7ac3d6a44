// Riverfeed as a subgraph of a supergraph: `serve --federation` beside a
// small product service that owns `User.email` and the applicants, composed
// and served by Hive Gateway. Feed queries and a live subscription through
// the gateway join Riverfeed's actions with the product's emails, and an
// applicant of the product's carries its activity from Riverfeed. A
// Relay-style product (its own `Node`, `node` and `PageInfo`) composes with
// `--federation-node none`.

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
  return serveSubgraph(USERS_SDL, {
    Query: { applicant: (_, { id }) => ({ id, name: `Applicant ${id}` }) },
    User: {
      __resolveReference: ({ userId }) => ({ userId, email: `${userId}@example.com` }),
    },
    Applicant: {
      __resolveReference: ({ id }) => ({ id, name: `Applicant ${id}` }),
    },
  });
}

/** Serves a subgraph built with `@apollo/subgraph` on a free port. */
function serveSubgraph(sdl, resolvers) {
  const schema = buildSubgraphSchema([{ typeDefs: parse(sdl), resolvers }]);
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

/** Composes Riverfeed's subgraph (its `_service` SDL, as a gateway's
 * composition reads it) with the product's; the composition's result. */
async function compose(base, product) {
  const { _service } = await gql(base, 'alice', '{ _service { sdl } }');
  return composeServices([
    { name: 'riverfeed', typeDefs: parse(_service.sdl), url: `${base}/graphql` },
    { name: 'product', typeDefs: parse(product.sdl), url: `${product.base}/graphql` },
  ]);
}

/** Hive Gateway serving `supergraph` on a free port, forwarding Riverfeed's
 * identity headers (dev mode), and a client's `Idempotency-Key`, with every
 * subgraph request. */
async function startGateway(supergraph) {
  const runtime = createGatewayRuntime({
    supergraph,
    logging: false,
    propagateHeaders: {
      fromClientToSubgraphs: ({ request }) => ({
        'x-riverfeed-tenant': request.headers.get('x-riverfeed-tenant'),
        'x-riverfeed-user': request.headers.get('x-riverfeed-user'),
        'idempotency-key': request.headers.get('idempotency-key'),
      }),
    },
  });
  const { base, server } = await listen(createServer(runtime));
  return {
    base,
    stop: async () => {
      server.close();
      await runtime.dispose?.();
    },
  };
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

before(async () => {
  riverfeed = await startServer(['--federation', '--federation-entity', 'Applicant=id']);
  users = await startUserService();
  const composed = await compose(riverfeed.base, { sdl: USERS_SDL, base: users.base });
  assert.equal(composed.errors, undefined, JSON.stringify(composed.errors));
  gateway = await startGateway(composed.supergraphSdl);
  await gql(riverfeed.base, 'bob', 'mutation { upsertUser(input: {userId: "bob", name: "Bob"}) { userId } }');
  await gql(riverfeed.base, 'alice', 'mutation { follow(userId: "bob") }');
});

after(async () => {
  await gateway?.stop();
  users?.server.close();
  await riverfeed?.stop();
});

/** A query through the gateway as `user`; its data (no error allowed). */
async function throughGateway(user, query, base = gateway.base, headers = {}, variables = {}) {
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      ...identity(user),
      ...headers,
    },
    body: JSON.stringify({ query, variables }),
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
  const response = await fetch(`${gateway.base}/graphql`, {
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

/** A Relay-style product: its own `Node` interface and `node` field, its
 * own `PageInfo` and connections, and a `User` whose `id` is its own
 * global id (Riverfeed's subgraph joins it by `userId`). */
const RELAY_SDL = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key", "@shareable"])
  interface Node { id: ID! }
  type PageInfo @shareable {
    hasNextPage: Boolean!
    hasPreviousPage: Boolean!
    startCursor: String
    endCursor: String
  }
  type User implements Node @key(fields: "id") @key(fields: "userId") {
    id: ID!
    userId: String!
    email: String!
  }
  type Team implements Node @key(fields: "id") {
    id: ID!
    title: String!
    members(first: Int, after: String): TeamMemberConnection!
  }
  type TeamMemberConnection { edges: [TeamMemberEdge!]! pageInfo: PageInfo! }
  type TeamMemberEdge { cursor: String! node: User! }
  type Query {
    node(id: ID!): Node
    team(id: ID!): Team
  }
`;

/** The Relay product's objects, by its own global ids. */
function startRelayProduct() {
  const user = (userId) => ({ __typename: 'User', id: `product-user:${userId}`, userId, email: `${userId}@product.test` });
  const team = { __typename: 'Team', id: 'product-team:core', title: 'Core' };
  const find = (id) => {
    if (id === team.id) return team;
    const userId = id.startsWith('product-user:') ? id.slice('product-user:'.length) : null;
    return userId ? user(userId) : null;
  };
  return serveSubgraph(RELAY_SDL, {
    Query: { node: (_, { id }) => find(id), team: (_, { id }) => find(id) },
    Node: { __resolveType: (object) => object.__typename },
    User: { __resolveReference: ({ id, userId }) => (userId ? user(userId) : find(id)) },
    Team: {
      __resolveReference: ({ id }) => find(id),
      members: () => ({
        edges: ['bob', 'carol'].map((id) => ({ cursor: id, node: user(id) })),
        pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: 'bob', endCursor: 'carol' },
      }),
    },
  }).then((served) => ({ ...served, sdl: RELAY_SDL }));
}

test('a Relay-style product subgraph composes with --federation-node none', async () => {
  const relayRiverfeed = await startServer(['--federation', '--federation-node', 'none']);
  const product = await startRelayProduct();
  let relayGateway;
  try {
    const composed = await compose(relayRiverfeed.base, product);
    assert.equal(composed.errors, undefined, JSON.stringify(composed.errors));
    relayGateway = await startGateway(composed.supergraphSdl);
    const base = relayRiverfeed.base;
    await gql(base, 'carol', 'mutation { upsertUser(input: {userId: "carol", name: "Carol"}) { userId } }');
    await gql(base, 'bob', 'mutation { follow(userId: "carol") }');
    await postStatus(base, 'carol', 'Relay and the supergraph');

    // The product's `node` finds its own user; Riverfeed's fields of that
    // user (joined by `userId`) come beside the product's.
    const { node } = await throughGateway(
      'bob',
      `{ node(id: "product-user:carol") {
          id
          ... on User { userId email name followers(first: 5) { nodes { userId email } pageInfo { hasNextPage } } }
        } }`,
      relayGateway.base,
    );
    assert.deepEqual(node, {
      id: 'product-user:carol',
      userId: 'carol',
      email: 'carol@product.test',
      name: 'Carol',
      followers: { nodes: [{ userId: 'bob', email: 'bob@product.test' }], pageInfo: { hasNextPage: false } },
    });

    // The same user's activity from Riverfeed, its actor joined with the
    // product's email; and the product's own connection with its PageInfo.
    const data = await throughGateway(
      'bob',
      `{ actorFeed(userId: "carol", first: 5) {
          edges { node { actor { userId email } descriptor { ... on StatusPost { text } } } }
          pageInfo { hasNextPage }
        }
        team(id: "product-team:core") { title members { edges { node { userId name } } pageInfo { endCursor } } } }`,
      relayGateway.base,
    );
    assert.deepEqual(data.actorFeed.edges, [
      { node: { actor: { userId: 'carol', email: 'carol@product.test' }, descriptor: { text: 'Relay and the supergraph' } } },
    ]);
    assert.equal(data.actorFeed.pageInfo.hasNextPage, false);
    assert.deepEqual(data.team, {
      title: 'Core',
      members: {
        edges: [{ node: { userId: 'bob', name: null } }, { node: { userId: 'carol', name: 'Carol' } }],
        pageInfo: { endCursor: 'carol' },
      },
    });
  } finally {
    await relayGateway?.stop();
    product.server.close();
    await relayRiverfeed.stop();
  }
});

test("Riverfeed's own Node beside a Relay-style product is refused by composition", async () => {
  // `--federation-node own` (the default) keeps `node` and `User.id`
  // Riverfeed's, which a product with its own cannot share.
  const product = await startRelayProduct();
  try {
    const composed = await compose(riverfeed.base, product);
    assert.ok(composed.errors?.length, 'composition fails');
    const messages = composed.errors.map((e) => e.message).join('\n');
    assert.match(messages, /Query\.node/);
    assert.doesNotMatch(messages, /PageInfo/);
  } finally {
    product.server.close();
  }
});

test('a retried recordAction through the gateway records one action', async () => {
  // A backend retrying after a timeout: by its foreignId, the second record
  // answers the first action, not created again.
  const record = `mutation($input: RecordActionInput!) { recordAction(input: $input) { actionId created } }`;
  const input = { descriptor: { statusPost: { text: 'Once only' } }, foreignId: 'post-77' };
  const first = await throughGateway('bob', record, gateway.base, {}, { input });
  const again = await throughGateway('bob', record, gateway.base, {}, { input });
  assert.equal(first.recordAction.created, true);
  assert.deepEqual(again.recordAction, { actionId: first.recordAction.actionId, created: false });

  // Any mutation, by an Idempotency-Key the gateway passes on: the retry
  // is answered as the first time, nothing done twice.
  const follow = 'mutation { follow(userId: "alice") }';
  const key = { 'idempotency-key': `retry-${Date.now()}` };
  const followed = await throughGateway('bob', follow, gateway.base, key);
  const retried = await throughGateway('bob', follow, gateway.base, key);
  assert.equal(followed.follow, true);
  assert.equal(retried.follow, true, 'the stored answer, though following again would say false');
  const plain = await throughGateway('bob', follow);
  assert.equal(plain.follow, false, 'without the key, a second follow changes nothing');
});
