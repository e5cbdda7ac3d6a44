// GraphiQL with a Riverfeed identity: the dev-mode tenant and user (from
// ?tenant=&user=, else as last picked, else acme / alice) and an optional
// bearer token. Both go on every HTTP request and in the websocket's
// connection_init payload; changing one starts a new fetcher.
'use strict';

// The nonce the page's policy lets styles carry: GraphiQL's dialogs give it
// to the <style> element they add (the name is the bundler's convention).
window.__webpack_nonce__ = document.querySelector('meta[name=style-nonce]').content;

// The first query shown, written by the server for the action types it
// serves (its descriptor catalog).
const DEFAULT_QUERY = document.querySelector('meta[name=default-query]').content;

const form = document.getElementById('identity');
const params = new URLSearchParams(location.search);
// The picker is remembered; the token only for this tab's session.
const remembered = (name, fallback) =>
  params.get(name) || localStorage.getItem(`riverfeed:${name}`) || fallback;
form.tenant.value = remembered('tenant', 'acme');
form.user.value = remembered('user', 'alice');
form.token.value = sessionStorage.getItem('riverfeed:token') || '';

/** The identity as headers, which the connection_init payload repeats. */
function identity() {
  const headers = {
    'x-riverfeed-tenant': form.tenant.value.trim(),
    'x-riverfeed-user': form.user.value.trim(),
  };
  const token = form.token.value.trim();
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

function fetcher() {
  const headers = identity();
  return GraphiQL.createFetcher({
    url: '/graphql',
    headers,
    subscriptionUrl: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/graphql/ws`,
    wsConnectionParams: headers,
  });
}

const root = ReactDOM.createRoot(document.getElementById('graphiql'));
function render() {
  root.render(
    React.createElement(GraphiQL, {
      fetcher: fetcher(),
      defaultQuery: DEFAULT_QUERY,
      defaultEditorToolsVisibility: true,
    }),
  );
}

form.addEventListener('submit', (event) => event.preventDefault());
form.addEventListener('change', () => {
  localStorage.setItem('riverfeed:tenant', form.tenant.value.trim());
  localStorage.setItem('riverfeed:user', form.user.value.trim());
  sessionStorage.setItem('riverfeed:token', form.token.value.trim());
  // The address says who you are, so a reload (or a shared link) keeps it.
  const url = new URL(location.href);
  url.searchParams.set('tenant', form.tenant.value.trim());
  url.searchParams.set('user', form.user.value.trim());
  history.replaceState(null, '', url);
  render();
});
render();
