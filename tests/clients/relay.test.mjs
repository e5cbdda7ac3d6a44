// Relay against a server that runs trusted documents only: relay-compiler
// persists the operations of relay/ into a manifest, the server enforces
// it, and relay-runtime sends each operation by its id alone.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Environment, Network, RecordSource, Store, commitMutation, fetchQuery } from 'relay-runtime';
import {
  HERE, ROOT, eventually, identity, logVersions, post, startServer,
} from './server.mjs';

logVersions('relay.test.mjs', ['relay-runtime', 'relay-compiler']);

let server;
let project;
let manifest;
const artifacts = {};

/** Compiles the operations of relay/ in a scratch project (so nothing it
 * generates lands in the tree) and loads the artifacts it wrote. */
async function compile() {
  project = mkdtempSync(join(tmpdir(), 'riverfeed-relay-'));
  for (const file of readdirSync(join(HERE, 'relay'))) copyFileSync(join(HERE, 'relay', file), join(project, file));
  mkdirSync(join(project, '__generated__'));
  // The compiler adds to the manifest it finds; it must exist.
  writeFileSync(join(project, 'persisted.json'), '{}');
  writeFileSync(join(project, 'relay.config.json'), JSON.stringify({
    src: '.',
    schema: join(ROOT, 'schema.graphql'),
    language: 'javascript',
    artifactDirectory: './__generated__',
    persistConfig: { file: './persisted.json', algorithm: 'SHA256' },
  }));
  execFileSync(join(HERE, 'node_modules/.bin/relay-compiler'), [], { cwd: project, stdio: 'pipe' });
  manifest = JSON.parse(readFileSync(join(project, 'persisted.json'), 'utf8'));
  for (const name of ['FeedPageQuery', 'PostStatusMutation']) {
    const url = pathToFileURL(join(project, '__generated__', `${name}.graphql.js`));
    artifacts[name] = (await import(url)).default;
  }
}

before(compile);
after(() => { if (project) rmSync(project, { recursive: true, force: true }); });

/** A Relay environment as `user` that sends operations by id only, and
 * records what it sent. */
function environment(user, sent) {
  const network = Network.create(async (params, variables) => {
    const body = { doc_id: params.id, variables };
    sent.push(body);
    const response = await fetch(`${server.base}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', ...identity(user) },
      body: JSON.stringify(body),
    });
    return response.json();
  });
  return new Environment({ network, store: new Store(new RecordSource()) });
}

function commit(env, mutation, variables) {
  return new Promise((resolveCommit, reject) => {
    commitMutation(env, {
      mutation,
      variables,
      onCompleted: (response, errors) => (errors ? reject(new Error(JSON.stringify(errors))) : resolveCommit(response)),
      onError: reject,
    });
  });
}

test('relay-compiler persists every operation into the manifest', () => {
  for (const artifact of Object.values(artifacts)) {
    assert.match(artifact.params.id ?? '', /^[0-9a-f]{64}$/, `${artifact.params.name} has a persisted id`);
    assert.equal(artifact.params.text, null, 'the artifact carries no document text');
    assert.match(manifest[artifact.params.id], new RegExp(artifact.params.name));
  }
});

describe('a server that enforces the manifest', () => {
  before(async () => {
    server = await startServer([
      '--trusted-documents', join(project, 'persisted.json'), '--trusted-documents-mode', 'enforce',
    ]);
  });
  after(async () => { await server?.stop(); });

  test('persisted Relay operations run by doc_id under enforce', async () => {
    const sent = [];
    const env = environment('rita', sent);
    const posted = await commit(env, artifacts.PostStatusMutation, { text: 'relay by doc_id' });
    assert.ok(posted.recordAction.id);

    const data = await eventually('the post in the feed through Relay', async () => {
      const result = await fetchQuery(env, artifacts.FeedPageQuery, { first: 5 }, { fetchPolicy: 'network-only' })
        .toPromise();
      return result.feed.edges.length > 0 && result;
    });
    assert.deepEqual(data.feed.edges.map((edge) => edge.node.action.descriptor.text), ['relay by doc_id']);
    assert.ok(data.feed.edges[0].node.actionId);
    assert.equal(data.feed.pageInfo.hasNextPage, false);
    for (const body of sent) {
      assert.ok(manifest[body.doc_id], 'every request named a persisted document');
      assert.equal(body.query, undefined);
    }
  });

  test('a document by documentId also runs under enforce', async () => {
    const id = artifacts.FeedPageQuery.params.id;
    const { status, body } = await post(server.base, 'rita', { documentId: id, variables: { first: 1 } });
    assert.equal(status, 200);
    assert.equal(body.errors, undefined, JSON.stringify(body.errors));
    assert.ok(Array.isArray(body.data.feed.edges));
  });

  test('a plain query is refused under enforce', async () => {
    const { body } = await post(server.base, 'rita', { query: '{ viewer { id } }' });
    assert.equal(body.data ?? null, null);
    assert.equal(body.errors?.[0]?.extensions?.code, 'TRUSTED_DOCUMENT_REQUIRED', JSON.stringify(body));
  });
});
