// Riverfeed web demo: a home feed, slices by applicant or position, comments
// and likes, and live updates over graphql-transport-ws. Plain JavaScript, no
// build step, no third-party code: it talks to the server that served it and
// to nothing else.
'use strict';

(() => {
  const TENANT = 'demo';
  const PAGE = 20;
  /** Actions whose counts and comments stream live at once (cards in view
   * and open threads). The server allows 16 subscriptions per connection:
   * this leaves room for the feed, a slice and the notifications. */
  const MAX_WATCHED = 12;
  /** Notification groups per page of the bell's panel. */
  const NOTICE_PAGE = 20;

  // ---------------------------------------------------------------- GraphQL

  /** Every field of every action type the server serves, as the server
   * wrote it into the page: the cards show the types they know and name
   * the others. */
  const DESCRIPTOR = document.querySelector('meta[name=descriptor-selection]').content;
  const ACTION_FIELDS = `fragment ActionFields on Action {
    id actionId actorId actor { userId name } conducted scope refIds
    commentCount likeCount viewerHasLiked
    descriptor { __typename ${DESCRIPTOR} }
  }`;
  const ITEM_FIELDS = `fragment ItemFields on FeedItem {
    cursor actionId relevancy
    reason { kind actorId rule by at }
    action { ...ActionFields }
  } ${ACTION_FIELDS}`;
  const COMMENT_FIELDS = 'id commentId authorId author { name } text created';
  const GROUP_FIELDS = `fragment GroupFields on NotificationGroup {
    id key reason count unreadCount seen read actorCount lastAt refId
    actors(first: 3) { userId name }
    action {
      actionId actorId actor { userId name }
      descriptor { __typename ${DESCRIPTOR} }
    }
  }`;

  const Q = {
    feed: `query Feed($after: String) {
      feed(first: ${PAGE}, after: $after) {
        edges { node { ...ItemFields } }
        pageInfo { hasNextPage endCursor }
        eventsCursor
      }
    } ${ITEM_FIELDS}`,
    slice: `query Slice($refId: String!, $after: String) {
      slice(refId: $refId, first: ${PAGE}, after: $after) {
        nodes { ...ActionFields }
        pageInfo { hasNextPage endCursor }
      }
    } ${ACTION_FIELDS}`,
    comments: `query Comments($id: ID!) {
      action(actionId: $id) { actionId commentCount likeCount comments(first: 100) { nodes { ${COMMENT_FIELDS} } } }
    }`,
    counts: 'query Counts($id: ID!) { action(actionId: $id) { actionId commentCount likeCount viewerHasLiked } }',
    post: 'mutation Post($input: RecordActionInput!) { recordAction(input: $input) { actionId } }',
    comment: `mutation Comment($id: ID!, $text: String!) { comment(actionId: $id, text: $text) { ${COMMENT_FIELDS} } }`,
    like: 'mutation Like($id: ID!) { like(actionId: $id) { actionId commentCount likeCount viewerHasLiked } }',
    unlike: 'mutation Unlike($id: ID!) { unlike(actionId: $id) { actionId commentCount likeCount viewerHasLiked } }',
    feedEvents: `subscription FeedEvents($after: String) {
      feedEvents(after: $after) { kind resumeCursor item { ...ItemFields } }
    } ${ITEM_FIELDS}`,
    sliceEvents: `subscription SliceEvents($refId: ID!) {
      sliceEvents(refId: $refId) { action { ...ActionFields } }
    } ${ACTION_FIELDS}`,
    notifications: `query Notifications($after: String) {
      notifications(first: ${NOTICE_PAGE}, after: $after) {
        edges { node { ...GroupFields } }
        pageInfo { hasNextPage endCursor }
        unseenCount unreadCount
      }
    } ${GROUP_FIELDS}`,
    noticeCounts: 'query NoticeCounts { notificationCounts { unseenCount unreadCount } }',
    markSeen: 'mutation MarkSeen { markSeen { unseenCount unreadCount } }',
    markRead: `mutation MarkRead($ids: [ID!]!) {
      markRead(ids: $ids) { groups { ...GroupFields } unseenCount unreadCount }
    } ${GROUP_FIELDS}`,
    markAllRead: `mutation MarkAllRead {
      markAllRead { groups { ...GroupFields } unseenCount unreadCount }
    } ${GROUP_FIELDS}`,
    noticeEvents: `subscription NotificationEvents {
      notificationEvents { kind groupId unseenCount unreadCount group { ...GroupFields } }
    } ${GROUP_FIELDS}`,
    actionEvents: `subscription ActionEvents($actionId: ID!) {
      actionEvents(actionId: $actionId) { kind actionId commentCount likeCount comment { ${COMMENT_FIELDS} } }
    }`,
  };

  class GraphQLError extends Error {
    constructor(message, code) {
      super(message);
      this.code = code;
    }
  }

  /** Errors of a response, as one GraphQLError. */
  function toError(errors) {
    const list = Array.isArray(errors) ? errors : [errors];
    const message = list.map((e) => (e && e.message) || String(e)).join('; ');
    const code = list[0] && list[0].extensions && list[0].extensions.code;
    return new GraphQLError(message || 'request failed', code);
  }

  let me = null;

  async function gql(query, variables) {
    let response;
    try {
      response = await fetch('/graphql', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-riverfeed-tenant': TENANT,
          'x-riverfeed-user': me.id,
        },
        body: JSON.stringify({ query, variables }),
      });
    } catch (err) {
      throw new GraphQLError(`the server cannot be reached (${err.message})`, 'NETWORK');
    }
    let body;
    try {
      body = await response.json();
    } catch {
      throw new GraphQLError(`the server answered ${response.status}`, 'HTTP');
    }
    if (body.errors && body.errors.length) throw toError(body.errors);
    return body.data;
  }

  // ------------------------------------------------- graphql-transport-ws

  /** Close codes after which reconnecting cannot help. */
  const FATAL_CLOSES = new Set([4400, 4401, 4403, 4406]);

  /**
   * A minimal graphql-transport-ws client: one socket, many subscriptions,
   * reconnecting with exponential backoff and re-subscribing (each with fresh
   * variables, so a feed resumes where it left off).
   */
  class LiveClient {
    constructor(url, payload, onState) {
      this.url = url;
      this.payload = payload;
      this.onState = onState;
      this.subs = new Map();
      this.nextId = 1;
      this.attempt = 0;
      this.ws = null;
      this.acked = false;
      this.timers = {};
      this.connect();
    }

    connect() {
      this.acked = false;
      this.onState('connecting');
      const ws = new WebSocket(this.url, 'graphql-transport-ws');
      this.ws = ws;
      ws.addEventListener('open', () => {
        this.send({ type: 'connection_init', payload: this.payload });
      });
      ws.addEventListener('message', (event) => this.receive(event.data));
      ws.addEventListener('close', (event) => this.closed(ws, event));
      // The server must acknowledge in time, or we try again.
      this.timers.ack = setTimeout(() => ws.close(4408, 'no connection_ack'), 10000);
    }

    receive(data) {
      let msg;
      try {
        msg = JSON.parse(data);
      } catch {
        return;
      }
      const sub = msg.id !== undefined ? this.subs.get(msg.id) : undefined;
      switch (msg.type) {
        case 'connection_ack':
          clearTimeout(this.timers.ack);
          this.acked = true;
          this.attempt = 0;
          this.onState('live');
          for (const [id, s] of this.subs) this.start(id, s);
          this.heartbeat();
          break;
        case 'ping':
          this.send({ type: 'pong' });
          break;
        case 'pong':
          clearTimeout(this.timers.pong);
          break;
        case 'next':
          if (sub) sub.next(msg.payload);
          break;
        case 'error':
          if (sub) {
            this.subs.delete(msg.id);
            sub.error(toError(msg.payload));
          }
          break;
        case 'complete':
          if (sub) {
            this.subs.delete(msg.id);
            if (sub.complete) sub.complete();
          }
          break;
        default:
          break;
      }
    }

    /** Pings every 20 s; a server silent for 10 s more is presumed gone. */
    heartbeat() {
      clearInterval(this.timers.ping);
      this.timers.ping = setInterval(() => {
        this.send({ type: 'ping' });
        clearTimeout(this.timers.pong);
        const ws = this.ws;
        this.timers.pong = setTimeout(() => ws && ws.close(4499, 'no pong'), 10000);
      }, 20000);
    }

    closed(ws, event) {
      if (ws !== this.ws) return;
      for (const name of ['ack', 'pong', 'retry']) clearTimeout(this.timers[name]);
      clearInterval(this.timers.ping);
      this.ws = null;
      this.acked = false;
      if (FATAL_CLOSES.has(event.code)) {
        this.onState('failed', event.reason || `closed with ${event.code}`);
        return;
      }
      // 0.5 s, 1 s, 2 s … up to 15 s, with jitter so many tabs do not
      // come back in lockstep.
      const base = Math.min(15000, 500 * 2 ** this.attempt);
      const delay = Math.round(base / 2 + Math.random() * (base / 2));
      this.attempt += 1;
      this.onState('offline', delay);
      this.timers.retry = setTimeout(() => this.connect(), delay);
    }

    send(message) {
      if (this.ws && this.ws.readyState === WebSocket.OPEN) {
        this.ws.send(JSON.stringify(message));
      }
    }

    start(id, sub) {
      const variables = typeof sub.variables === 'function' ? sub.variables() : sub.variables;
      this.send({ id, type: 'subscribe', payload: { query: sub.query, variables } });
    }

    /** Subscribes; returns a function that ends the subscription. */
    subscribe(query, variables, handlers) {
      const id = String(this.nextId++);
      const sub = { query, variables, ...handlers };
      this.subs.set(id, sub);
      if (this.acked) this.start(id, sub);
      return () => {
        if (this.subs.delete(id) && this.acked) this.send({ id, type: 'complete' });
      };
    }
  }

  // ------------------------------------------------------------ utilities

  const $ = (id) => document.getElementById(id);

  /** Builds an element: attributes (`text` sets textContent, `on*` listeners)
   * and children (strings become text, never markup). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'text') el.textContent = value;
      else if (key === 'class') el.className = value;
      else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
      else if (key in el && typeof value !== 'string') el[key] = value;
      else el.setAttribute(key, value === true ? '' : value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const relative = new Intl.RelativeTimeFormat('en', { numeric: 'auto' });
  function ago(iso) {
    const seconds = (Date.parse(iso) - Date.now()) / 1000;
    const abs = Math.abs(seconds);
    if (abs < 45) return 'just now';
    if (abs < 3600) return relative.format(Math.round(seconds / 60), 'minute');
    if (abs < 86400) return relative.format(Math.round(seconds / 3600), 'hour');
    if (abs < 86400 * 30) return relative.format(Math.round(seconds / 86400), 'day');
    return new Date(iso).toLocaleDateString();
  }

  function timeEl(iso) {
    return h('time', { datetime: iso, title: new Date(iso).toLocaleString(), text: ago(iso) });
  }

  function announce(message) {
    const region = $('announcer');
    region.textContent = '';
    // A fresh text node is announced even when it repeats the last one.
    requestAnimationFrame(() => {
      region.textContent = message;
    });
  }

  function toast(message) {
    const el = h('div', { class: 'toast' }, message,
      h('button', { type: 'button', class: 'toast-close', 'aria-label': 'Dismiss', text: '×', onclick: () => el.remove() }));
    $('toasts').append(el);
    setTimeout(() => el.remove(), 8000);
  }

  /** Runs a (possibly async) handler, showing its failure instead of
   * throwing it. It starts synchronously, so a submit handler can still
   * prevent the default. */
  function guarded(fn) {
    const report = (err) => toast((err && err.message) || String(err));
    return (...args) => {
      try {
        const result = fn(...args);
        if (result && typeof result.then === 'function') result.catch(report);
      } catch (err) {
        report(err);
      }
    };
  }

  // ---------------------------------------------------------------- roster

  let roster = null;
  const people = new Map();
  const refs = new Map();

  function personName(id) {
    const p = people.get(id);
    return p ? p.name : id;
  }

  function initials(name) {
    return name
      .split(/\s+/)
      .filter(Boolean)
      .slice(0, 2)
      .map((w) => w[0].toUpperCase())
      .join('');
  }

  function colour(id) {
    let hash = 0;
    for (const ch of id) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
    return `c${hash % 8}`;
  }

  function unitName(id) {
    const unit = roster.departments.concat(roster.teams).find((u) => u.id === id);
    return unit ? unit.name : id;
  }

  function indexRoster() {
    for (const person of roster.users) people.set(person.id, person);
    for (const position of roster.positions) {
      refs.set(position.id, { kind: 'position', name: position.name, position });
    }
    for (const applicant of roster.applicants) {
      refs.set(applicant.id, { kind: 'applicant', name: applicant.name, applicant });
    }
  }

  function refLink(id, name) {
    const known = refs.get(id);
    return h('a', {
      class: `ref ref-${known ? known.kind : 'other'}`,
      href: `#/ref/${encodeURIComponent(id)}`,
      'data-testid': 'ref-link',
      'data-ref-id': id,
      text: name || (known ? known.name : id),
    });
  }

  // ----------------------------------------------------------------- cards

  function stars(score) {
    const full = Math.max(0, Math.min(5, Math.round(score)));
    return h('span', { class: 'stars', role: 'img', 'aria-label': `${score} out of 5` },
      '★'.repeat(full) + '☆'.repeat(5 - full));
  }

  const ICONS = {
    heart: 'M12 21s-7.5-4.6-9.5-9.3C1.2 8.4 3.4 5 6.8 5c2 0 3.4 1.1 4.2 2.4h2C13.8 6.1 15.2 5 17.2 5c3.4 0 5.6 3.4 4.3 6.7C19.5 16.4 12 21 12 21z',
    bubble: 'M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4H4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z',
    star: 'M12 2l3 6.9 7.5.7-5.7 5 1.7 7.4L12 18.3 5.5 22l1.7-7.4-5.7-5 7.5-.7z',
  };

  /** A small decorative icon (no icon fonts or emoji: they may be missing). */
  function icon(name) {
    const ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('class', `icon icon-${name}`);
    svg.setAttribute('aria-hidden', 'true');
    const path = document.createElementNS(ns, 'path');
    path.setAttribute('d', ICONS[name]);
    svg.append(path);
    return svg;
  }

  const strong = (text) => h('strong', { class: 'who' }, text);

  /** One sentence saying what happened, and the body beneath it. */
  function describe(action) {
    const d = action.descriptor;
    const actor = strong((action.actor && action.actor.name) || personName(action.actorId));
    switch (d.__typename) {
      case 'StatusPost':
        return {
          line: [actor, ' posted an update'],
          body: h('p', { class: 'status-text', text: d.text }),
        };
      case 'ApplicationRating':
        return {
          line: [strong(d.raterName), ' rated ', refLink(d.applicantId, d.applicantName),
            ' for ', refLink(d.positionId, d.positionName)],
          body: h('div', { class: 'rating' },
            stars(d.ratingScore),
            h('span', { class: 'score', text: `${d.ratingScore.toFixed(1)} / 5` }),
            d.ratingText ? h('blockquote', { text: d.ratingText }) : null,
            d.tags.length ? h('ul', { class: 'tags', 'aria-label': 'Tags' }, d.tags.map((t) => h('li', { text: t }))) : null),
        };
      case 'NewApplicant':
        return {
          line: [refLink(d.applicantId, d.applicantName), ' applied for ', refLink(d.positionId, d.positionName)],
          body: h('p', { class: 'byline' }, 'Added by ', actor),
        };
      case 'ApplicantHired':
        return {
          line: [strong(d.hiredByName), ' hired ', refLink(d.applicantId, d.applicantName),
            ' as ', refLink(d.positionId, d.positionName)],
          body: h('p', { class: 'celebrate' }, icon('star'), 'Welcome aboard!'),
        };
      case 'ApplicantRatingRequested':
        return {
          line: [strong(d.requestedByName), ' asked ', strong(d.raterName), ' to rate ',
            refLink(d.applicantId, d.applicantName), ' for ', refLink(d.positionId, d.positionName)],
          body: null,
        };
      default:
        return { line: [actor, ` recorded ${d.__typename}`], body: null };
    }
  }

  const SCOPES = {
    PUBLIC: 'Public',
    TEAM: 'Team',
    DEPARTMENT: 'Department',
    RESTRICTED: 'Restricted',
  };

  const RULES = {
    ASSIGNED: 'you are assigned to something it is about',
    DEPARTMENT: 'someone from your department took part',
    SUPERVISOR: 'someone you supervise took part',
    PARTICIPATED: 'you took part in it',
  };

  function reasonText(reason) {
    switch (reason.kind) {
      case 'OWN': return 'Your action';
      case 'FOLLOWS': return `You follow ${personName(reason.actorId)}`;
      case 'FRIEND': return `${personName(reason.actorId)} is your friend`;
      case 'TEAM': return 'Shared with your team';
      case 'DEPARTMENT': return 'Shared with your department';
      case 'RESTRICTED': return 'Shared with you';
      case 'BUMPED':
        return `bumped: ${reason.rule || 'ACTIVITY'}${reason.by ? ` by ${personName(reason.by)}` : ''}`;
      default: return reason.kind;
    }
  }

  function reasonEl(reason) {
    return h('p', {
      class: `reason reason-${reason.kind.toLowerCase()}`,
      'data-testid': 'feed-reason',
      'data-reason-kind': reason.kind,
      'data-bump-rule': reason.rule || null,
      'data-bump-by': reason.by || null,
      title: reason.kind === 'BUMPED' && reason.rule ? `Moved up because ${RULES[reason.rule] || reason.rule}` : null,
    }, reasonText(reason), reason.kind === 'BUMPED' && reason.at ? [' · ', timeEl(reason.at)] : null);
  }

  let cardSeq = 0;

  /** A card for an action; `item` (a feed item) adds why it is in the feed. */
  function card(action, item, testid) {
    const n = ++cardSeq;
    const el = h('article', {
      class: 'card',
      'data-testid': testid,
      'data-action-id': action.actionId,
      'aria-labelledby': `card-${n}-line`,
    });
    el.dataset.seq = String(n);
    el.append(
      h('div', { class: 'card-head' },
        h('span', { class: 'avatar' }),
        h('div', { class: 'card-title' },
          h('p', { class: 'line', id: `card-${n}-line` }),
          h('p', { class: 'meta' }))),
      h('div', { class: 'card-body' }),
      h('div', { class: 'card-reason' }),
      h('footer', { class: 'card-actions' },
        h('button', {
          type: 'button', class: 'like', 'data-testid': 'like-button', 'aria-pressed': 'false',
          onclick: guarded(() => toggleLike(el)),
        }, icon('heart'), 'Like',
        h('span', { class: 'count like-count', 'data-testid': 'like-count', text: '0' })),
        h('button', {
          type: 'button', class: 'comments-toggle', 'data-testid': 'comments-toggle',
          'aria-expanded': 'false', 'aria-controls': `card-${n}-comments`,
          onclick: guarded(() => toggleThread(el)),
        }, icon('bubble'), 'Comments',
        h('span', { class: 'count comment-count', 'data-testid': 'comment-count', text: '0' }))),
      h('section', { class: 'thread', id: `card-${n}-comments`, 'data-testid': 'comments', hidden: true, 'aria-label': 'Comments' }),
    );
    fillCard(el, action, item);
    return el;
  }

  /** (Re)draws a card's contents in place, keeping its open thread. */
  function fillCard(el, action, item) {
    el.dataset.type = action.descriptor.__typename;
    const actorName = (action.actor && action.actor.name) || personName(action.actorId);
    const avatar = el.querySelector('.avatar');
    avatar.className = `avatar ${colour(action.actorId)}`;
    avatar.setAttribute('aria-hidden', 'true');
    avatar.textContent = initials(actorName);
    const { line, body } = describe(action);
    el.querySelector('.line').replaceChildren(...line);
    const named = new Set(Array.from(el.querySelectorAll('.line .ref'), (a) => a.dataset.refId));
    const others = action.refIds.filter((id) => !named.has(id));
    const meta = [
      timeEl(action.conducted), ' · ',
      h('span', { class: `scope scope-${action.scope.toLowerCase()}`, text: SCOPES[action.scope] || action.scope }),
    ];
    if (others.length) meta.push(' · ', ...others.flatMap((id, i) => (i ? [', ', refLink(id)] : [refLink(id)])));
    el.querySelector('.meta').replaceChildren(...meta);
    el.querySelector('.card-body').replaceChildren(...(body ? [body] : []));
    if (item) {
      el.dataset.reasonKind = item.reason.kind;
      el.querySelector('.card-reason').replaceChildren(reasonEl(item.reason));
    }
    setCounts(el, action);
  }

  function setCounts(el, counts) {
    if (counts.likeCount !== undefined) el.querySelector('.like-count').textContent = String(counts.likeCount);
    if (counts.commentCount !== undefined) el.querySelector('.comment-count').textContent = String(counts.commentCount);
    if (counts.viewerHasLiked !== undefined) {
      el.querySelector('.like').setAttribute('aria-pressed', String(counts.viewerHasLiked));
    }
  }

  function cardsOf(actionId) {
    return document.querySelectorAll(`article.card[data-action-id="${actionId}"]`);
  }

  function updateCounts(actionId, counts) {
    for (const el of cardsOf(actionId)) setCounts(el, counts);
  }

  function flashCard(el) {
    el.classList.remove('flash');
    // Restart the animation on a card that flashed before.
    void el.offsetWidth;
    el.classList.add('flash');
    clearTimeout(el.flashTimer);
    el.flashTimer = setTimeout(() => el.classList.remove('flash'), 2000);
  }

  // ------------------------------------------------------ likes, comments

  async function toggleLike(el) {
    const id = el.dataset.actionId;
    const liked = el.querySelector('.like').getAttribute('aria-pressed') === 'true';
    const data = await gql(liked ? Q.unlike : Q.like, { id });
    updateCounts(id, data[liked ? 'unlike' : 'like']);
  }

  function commentEl(comment) {
    return h('li', { class: 'comment', 'data-testid': 'comment', 'data-comment-id': comment.commentId },
      h('span', { class: `avatar small ${colour(comment.authorId)}`, 'aria-hidden': 'true',
        text: initials((comment.author && comment.author.name) || comment.authorId) }),
      h('div', {},
        h('p', { class: 'comment-head' },
          h('strong', { text: (comment.author && comment.author.name) || personName(comment.authorId) }), ' · ', timeEl(comment.created)),
        h('p', { class: 'comment-text', text: comment.text })));
  }

  function addComment(actionId, comment) {
    for (const el of cardsOf(actionId)) {
      const list = el.querySelector('.thread ol');
      if (!list || list.querySelector(`[data-comment-id="${comment.commentId}"]`)) continue;
      list.append(commentEl(comment));
      const empty = el.querySelector('.thread .empty');
      if (empty) empty.remove();
    }
  }

  async function toggleThread(el) {
    const thread = el.querySelector('.thread');
    const toggle = el.querySelector('.comments-toggle');
    const id = el.dataset.actionId;
    if (!thread.hidden) {
      thread.hidden = true;
      toggle.setAttribute('aria-expanded', 'false');
      watchers.release(id, `thread-${el.dataset.seq}`);
      return;
    }
    thread.hidden = false;
    toggle.setAttribute('aria-expanded', 'true');
    watchers.want(id, `thread-${el.dataset.seq}`);
    const list = h('ol', { class: 'comments' });
    const input = h('textarea', {
      class: 'comment-input', 'data-testid': 'comment-input', rows: '2', maxlength: '2000', required: true,
      id: `comment-input-${el.dataset.seq}`, placeholder: 'Write a comment…',
    });
    const form = h('form', { class: 'comment-form', onsubmit: guarded((e) => submitComment(e, el, input)) },
      h('label', { class: 'visually-hidden', for: input.id, text: 'Write a comment' }),
      input,
      h('button', { type: 'submit', class: 'primary', 'data-testid': 'comment-submit', text: 'Comment' }));
    thread.replaceChildren(h('p', { class: 'hint empty', text: 'Loading comments…' }), list, form);
    const data = await gql(Q.comments, { id });
    if (!data.action) {
      thread.replaceChildren(h('p', { class: 'hint', text: 'This action is gone.' }));
      return;
    }
    updateCounts(id, data.action);
    const empty = thread.querySelector('.empty');
    const nodes = data.action.comments.nodes;
    if (nodes.length && empty) empty.remove();
    else if (empty) empty.textContent = 'No comments yet.';
    for (const comment of nodes) addComment(id, comment);
    input.focus();
  }

  async function submitComment(event, el, input) {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    const button = event.target.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      const id = el.dataset.actionId;
      const data = await gql(Q.comment, { id, text });
      input.value = '';
      addComment(id, data.comment);
      announce('Comment posted');
      const counts = await gql(Q.counts, { id });
      if (counts.action) updateCounts(id, counts.action);
    } finally {
      button.disabled = false;
    }
  }

  /**
   * Live counts and comments for the actions that matter now: cards on
   * screen and open threads. Each action has one subscription however many
   * cards want it, and at most MAX_WATCHED actions are watched at once.
   */
  const watchers = {
    wanted: new Map(), // actionId -> Set of keys
    live: new Map(), // actionId -> unsubscribe
    want(id, key) {
      if (!this.wanted.has(id)) this.wanted.set(id, new Set());
      this.wanted.get(id).add(key);
      this.sync(id);
    },
    release(id, key) {
      const keys = this.wanted.get(id);
      if (!keys) return;
      keys.delete(key);
      if (!keys.size) this.wanted.delete(id);
      this.sync(id);
    },
    sync(id) {
      const stop = this.live.get(id);
      if (!this.wanted.has(id) && stop) {
        stop();
        this.live.delete(id);
        // A slot came free: give it to an action still waiting for one.
        for (const waiting of this.wanted.keys()) {
          if (!this.live.has(waiting)) {
            this.start(waiting);
            break;
          }
        }
      } else if (this.wanted.has(id) && !stop) {
        this.start(id);
      }
    },
    start(id) {
      if (this.live.size >= MAX_WATCHED || !live) return;
      this.live.set(id, live.subscribe(Q.actionEvents, { actionId: id }, {
        next: (payload) => onActionEvent(payload),
        error: () => this.live.delete(id),
        complete: () => this.live.delete(id),
      }));
    },
  };

  function onActionEvent(payload) {
    const event = payload.data && payload.data.actionEvents;
    if (!event) return;
    updateCounts(event.actionId, { commentCount: event.commentCount, likeCount: event.likeCount });
    if (event.kind === 'COMMENTED' && event.comment) addComment(event.actionId, event.comment);
  }

  /** Cards watch their action while on screen (and a moment after). */
  const onScreen = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      const el = entry.target;
      const key = `seen-${el.dataset.seq}`;
      clearTimeout(el.releaseTimer);
      if (entry.isIntersecting) watchers.want(el.dataset.actionId, key);
      else el.releaseTimer = setTimeout(() => watchers.release(el.dataset.actionId, key), 2000);
    }
  });

  function forget(el) {
    onScreen.unobserve(el);
    clearTimeout(el.releaseTimer);
    watchers.release(el.dataset.actionId, `seen-${el.dataset.seq}`);
    watchers.release(el.dataset.actionId, `thread-${el.dataset.seq}`);
    el.remove();
  }

  // ------------------------------------------------------------------ feed

  const feed = {
    entries: [], // { item, el }, highest relevancy first
    byId: new Map(),
    endCursor: null,
    hasNext: true,
    loading: false,
    resume: null, // where feedEvents picks up after a reconnect
    stop: null,
  };

  /** Feed order: relevancy, then action id, highest first. */
  function outranks(a, b) {
    const ra = Date.parse(a.relevancy);
    const rb = Date.parse(b.relevancy);
    if (ra !== rb) return ra > rb;
    return a.actionId > b.actionId;
  }

  /** Puts an item where its relevancy says, reusing the card of an item
   * already shown (an event for it moves and updates it). `live` items come
   * from events; `flash` draws the eye to them. */
  function placeItem(item, live, flash) {
    const container = $('feed');
    const existing = feed.byId.get(item.actionId);
    if (existing) {
      feed.entries.splice(feed.entries.indexOf(existing), 1);
      feed.byId.delete(item.actionId);
    }
    if (!item.action) {
      if (existing) forget(existing.el);
      return;
    }
    let index = feed.entries.findIndex((entry) => outranks(item, entry.item));
    if (index === -1) {
      if (feed.hasNext && live) {
        // It ranks below everything loaded: a later page brings it.
        if (existing) forget(existing.el);
        return;
      }
      index = feed.entries.length;
    }
    let el;
    if (existing) {
      el = existing.el;
      fillCard(el, item.action, item);
    } else {
      el = card(item.action, item, 'feed-card');
      onScreen.observe(el);
    }
    const next = feed.entries[index];
    container.insertBefore(el, next ? next.el : null);
    const entry = { item, el };
    feed.entries.splice(index, 0, entry);
    feed.byId.set(item.actionId, entry);
    if (flash) flashCard(el);
  }

  async function loadFeed() {
    if (feed.loading || !feed.hasNext) return;
    feed.loading = true;
    $('feed').setAttribute('aria-busy', 'true');
    $('feed-loading').hidden = false;
    try {
      const data = await gql(Q.feed, { after: feed.endCursor });
      const page = data.feed;
      const first = feed.endCursor === null;
      feed.endCursor = page.pageInfo.endCursor || feed.endCursor;
      feed.hasNext = page.pageInfo.hasNextPage;
      for (const edge of page.edges) {
        const shown = feed.byId.get(edge.node.actionId);
        if (!shown || outranks(edge.node, shown.item)) placeItem(edge.node, false, false);
      }
      if (first) {
        feed.resume = page.eventsCursor;
        subscribeFeed();
        if (!page.edges.length) {
          showNotice(roster.seeded
            ? 'Nothing in your feed yet.'
            : 'This server has no demo data: start it with `riverfeed serve --demo`.');
        }
      }
    } finally {
      feed.loading = false;
      $('feed').setAttribute('aria-busy', 'false');
      $('feed-loading').hidden = true;
      $('feed-more').hidden = !feed.hasNext;
      $('feed-end').hidden = feed.hasNext || feed.entries.length === 0;
    }
    keepFilling('feed');
  }

  function subscribeFeed() {
    if (feed.stop) feed.stop();
    // A stream can fail as an `error` message, or as a `next` carrying
    // errors followed by `complete`: either way it has ended.
    let ended = false;
    const fail = (err) => {
      if (ended) return;
      ended = true;
      feed.stop = null;
      // Fell behind, or the server no longer takes our resume cursor (a
      // restarted server seals cursors under a new key): start over.
      if (err.code === 'LAGGED' || err.code === 'BAD_USER_INPUT') {
        announce('Catching up…');
        reloadFeed();
      } else {
        toast(`Live updates stopped: ${err.message}`);
      }
    };
    feed.stop = live.subscribe(Q.feedEvents, () => ({ after: feed.resume }), {
      next: (payload) => {
        const event = payload.data && payload.data.feedEvents;
        if (event) onFeedEvent(event);
        else if (payload.errors) fail(toError(payload.errors));
      },
      error: fail,
      complete: () => fail(new GraphQLError('the server ended the stream', 'COMPLETE')),
    });
  }

  function onFeedEvent(event) {
    feed.resume = event.resumeCursor || feed.resume;
    const item = event.item;
    if (event.kind === 'REMOVED') {
      const shown = feed.byId.get(item.actionId);
      if (shown) {
        feed.entries.splice(feed.entries.indexOf(shown), 1);
        feed.byId.delete(item.actionId);
        forget(shown.el);
      }
      return;
    }
    // A stream resumed from a cursor replays recent changes, some of them
    // already on the page: those change nothing and stay quiet.
    const shown = feed.byId.get(item.actionId);
    const same = shown && shown.item.relevancy === item.relevancy
      && shown.item.reason.kind === item.reason.kind && shown.item.reason.at === item.reason.at;
    placeItem(item, true, !same);
    if (item.action && !same) {
      const what = describe(item.action).line.map((part) => (part instanceof Node ? part.textContent : part)).join('');
      announce(event.kind === 'BUMPED' ? `Moved up: ${what}` : `New: ${what}`);
    }
  }

  /** Starts the feed over (after falling too far behind). */
  function reloadFeed() {
    for (const entry of feed.entries) forget(entry.el);
    feed.entries = [];
    feed.byId.clear();
    feed.endCursor = null;
    feed.hasNext = true;
    guarded(loadFeed)();
  }

  function showNotice(text) {
    const notice = $('feed-notice');
    notice.textContent = text;
    notice.hidden = false;
  }

  async function postStatus(event) {
    event.preventDefault();
    const input = $('status-input');
    const text = input.value.trim();
    if (!text) return;
    const button = event.target.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      await gql(Q.post, {
        input: { descriptor: { statusPost: { text } }, scope: $('status-scope').value },
      });
      input.value = '';
      announce('Posted. It appears at the top of your feed in a moment.');
    } finally {
      button.disabled = false;
    }
  }

  // ----------------------------------------------------------------- slice

  const slice = {
    refId: null,
    ids: new Set(),
    endCursor: null,
    hasNext: false,
    loading: false,
    stop: null,
    generation: 0,
  };

  function sliceHeading(refId) {
    const known = refs.get(refId);
    if (!known) return { title: refId, sub: 'Everything that refers to it, newest first.' };
    if (known.kind === 'applicant') {
      const a = known.applicant;
      const position = refs.get(a.position);
      return {
        title: a.name,
        sub: `Applicant for ${position ? position.name : a.position} · recruiters: ${a.recruiters.map(personName).join(', ')}`,
      };
    }
    const p = known.position;
    return {
      title: p.name,
      sub: `Position in ${unitName(p.department)} · hiring manager: ${personName(p.hiringManager)}`,
    };
  }

  function openSlice(refId) {
    if (slice.stop) slice.stop();
    for (const el of $('slice').querySelectorAll('article.card')) forget(el);
    slice.generation += 1;
    Object.assign(slice, { refId, ids: new Set(), endCursor: null, hasNext: true, loading: false, stop: null });
    const { title, sub } = sliceHeading(refId);
    $('slice-title').textContent = title;
    $('slice-sub').textContent = sub;
    document.title = `${title} · Riverfeed demo`;
    slice.stop = live.subscribe(Q.sliceEvents, { refId }, {
      next: (payload) => {
        const event = payload.data && payload.data.sliceEvents;
        if (event && event.action && !slice.ids.has(event.action.actionId)) {
          slice.ids.add(event.action.actionId);
          const el = card(event.action, null, 'slice-card');
          $('slice').prepend(el);
          onScreen.observe(el);
          flashCard(el);
        }
      },
      error: (err) => toast(`Live updates of this page stopped: ${err.message}`),
    });
    guarded(loadSlice)();
  }

  async function loadSlice() {
    if (slice.loading || !slice.hasNext || !slice.refId) return;
    const generation = slice.generation;
    slice.loading = true;
    $('slice').setAttribute('aria-busy', 'true');
    $('slice-loading').hidden = false;
    try {
      const data = await gql(Q.slice, { refId: slice.refId, after: slice.endCursor });
      if (generation !== slice.generation) return;
      const page = data.slice;
      slice.endCursor = page.pageInfo.endCursor || slice.endCursor;
      slice.hasNext = page.pageInfo.hasNextPage;
      for (const action of page.nodes) {
        if (slice.ids.has(action.actionId)) continue;
        slice.ids.add(action.actionId);
        const el = card(action, null, 'slice-card');
        $('slice').append(el);
        onScreen.observe(el);
      }
    } finally {
      if (generation === slice.generation) {
        slice.loading = false;
        $('slice').setAttribute('aria-busy', 'false');
        $('slice-loading').hidden = true;
        $('slice-more').hidden = !slice.hasNext;
        $('slice-end').hidden = slice.hasNext;
      }
    }
    keepFilling('slice');
  }

  // --------------------------------------------------- scrolling, routing

  /** Loads the next page while the end of the list is in (or near) view:
   * a first page shorter than the screen needs no scrolling to continue. */
  function keepFilling(which) {
    const sentinel = $(`${which}-sentinel`);
    if (sentinel.offsetParent === null) return;
    if (sentinel.getBoundingClientRect().top < window.innerHeight + 600) {
      guarded(which === 'feed' ? loadFeed : loadSlice)();
    }
  }

  const nearEnd = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      guarded(entry.target.id === 'feed-sentinel' ? loadFeed : loadSlice)();
    }
  }, { rootMargin: '0px 0px 600px 0px' });

  let feedScroll = 0;

  function route() {
    const match = location.hash.match(/^#\/ref\/(.+)$/);
    const inSlice = Boolean(match);
    const wasSlice = !$('slice-view').hidden;
    if (inSlice) {
      if (!wasSlice) feedScroll = window.scrollY;
      $('feed-view').hidden = true;
      $('slice-view').hidden = false;
      openSlice(decodeURIComponent(match[1]));
      window.scrollTo(0, 0);
      $('slice-title').focus({ preventScroll: true });
    } else {
      if (slice.stop) slice.stop();
      slice.stop = null;
      slice.refId = null;
      $('slice-view').hidden = true;
      $('feed-view').hidden = false;
      document.title = 'Riverfeed demo';
      if (wasSlice) {
        window.scrollTo(0, feedScroll);
        $('feed-heading').focus({ preventScroll: true });
      }
    }
  }

  // -------------------------------------------------------------- sidebar

  function renderPicker() {
    const picker = $('user-picker');
    for (const dept of roster.departments) {
      const group = h('optgroup', { label: dept.name });
      for (const person of roster.users.filter((u) => u.department === dept.id)) {
        group.append(h('option', { value: person.id, text: `${person.name} — ${person.title}` }));
      }
      picker.append(group);
    }
    picker.value = me.id;
    picker.addEventListener('change', () => {
      const url = new URL(location.href);
      url.searchParams.set('user', picker.value);
      url.hash = '';
      location.assign(url.toString());
    });
  }

  function renderMe() {
    const items = me.assignments.map((id) => {
      const known = refs.get(id);
      const detail = known && known.kind === 'applicant'
        ? ` (${(refs.get(known.applicant.position) || { name: '' }).name})`
        : ' (position)';
      return h('li', {}, refLink(id), h('span', { class: 'hint', text: detail }));
    });
    $('me').replaceChildren(
      h('h2', { id: 'me-heading', text: 'You' }),
      h('div', { class: 'me-card' },
        h('span', { class: `avatar ${colour(me.id)}`, 'aria-hidden': 'true', text: initials(me.name) }),
        h('div', {},
          h('p', { class: 'me-name', text: me.name }),
          h('p', { class: 'hint', text: me.title }))),
      h('dl', { class: 'facts' },
        h('dt', { text: 'Department' }), h('dd', { text: unitName(me.department) }),
        h('dt', { text: 'Team' }), h('dd', { text: unitName(me.team) }),
        h('dt', { text: 'Supervisor' }), h('dd', { text: me.supervisor ? personName(me.supervisor) : '—' })),
      h('h3', { text: 'Assigned to you' }),
      items.length
        ? h('ul', { class: 'plain-list', 'data-testid': 'assignments' }, items)
        : h('p', { class: 'hint', text: 'Nothing assigned.' }),
    );
    $('positions').replaceChildren(...roster.positions.map((p) =>
      h('li', {}, refLink(p.id), h('span', { class: 'hint', text: ` · ${unitName(p.department)}` }))));
  }

  function liveState(state, detail) {
    const el = $('live-status');
    el.dataset.state = state;
    // Until the notifications stream starts again, replies to marks count.
    if (state !== 'live') notices.streaming = false;
    el.textContent = {
      connecting: 'Connecting…',
      live: 'Live',
      offline: `Offline — retrying in ${Math.ceil((detail || 0) / 1000)} s`,
      failed: `Live updates refused: ${detail}`,
    }[state];
  }

  // -------------------------------------------------------- notifications

  /**
   * The bell: a badge of unread groups and a panel of the viewer's
   * notification groups, newest first. `notificationEvents` keeps both live,
   * and it is the one source of truth while it runs: every page of the
   * viewer gets the same events in order, whoever marked what, so replies to
   * our own marks only count while the stream is down.
   */
  const notices = {
    entries: [], // { group, el }, latest first
    byId: new Map(),
    endCursor: null,
    hasNext: true,
    loaded: false, // the first page came
    loading: false,
    queued: null, // events that came while a page was loading
    stale: false, // the stream started over: events may have been missed
    streaming: false, // events arrive on a stream that runs now
    starts: 0,
    stop: null,
    generation: 0,
  };

  function setNoticeCounts(counts) {
    const n = counts.unreadCount;
    const bell = $('bell');
    const badge = $('bell-badge');
    badge.textContent = n > 99 ? '99+' : String(n);
    badge.hidden = n === 0;
    bell.dataset.unread = String(n);
    bell.dataset.unseen = String(counts.unseenCount);
    bell.setAttribute('aria-label', n ? `Notifications, ${n} unread` : 'Notifications, none unread');
  }

  const actorName = (user) => user.name || personName(user.userId);

  /** "A", "A and B", "A and 3 others", from the latest actors first. */
  function whoDidIt(group) {
    const names = group.actors.map((u) => strong(actorName(u)));
    const total = Math.max(group.actorCount, names.length);
    if (!names.length) return ['Someone'];
    if (total === 1) return [names[0]];
    if (total === 2 && names.length >= 2) return [names[0], ' and ', names[1]];
    const others = total - 1;
    return [names[0], ` and ${others} ${others === 1 ? 'other' : 'others'}`];
  }

  function excerpt(text, max = 40) {
    const flat = text.replace(/\s+/g, ' ').trim();
    return flat.length > max ? `${flat.slice(0, max - 1).trimEnd()}…` : flat;
  }

  /** "your rating of Mary Fanning", "Kai Tanaka's update “…”", "their
   * update" (when its one actor is its author). */
  function whoseWhat(group) {
    const action = group.action;
    if (!action) return ['your action'];
    let whose = `${(action.actor && action.actor.name) || personName(action.actorId)}'s`;
    if (action.actorId === me.id) whose = 'your';
    else if (group.actorCount === 1 && group.actors.length && group.actors[0].userId === action.actorId) whose = 'their';
    const d = action.descriptor;
    switch (d.__typename) {
      case 'StatusPost': return [`${whose} update “${excerpt(d.text)}”`];
      case 'ApplicationRating': return [`${whose} rating of `, strong(d.applicantName)];
      case 'NewApplicant': return [`${whose} post on `, strong(d.applicantName), '’s application'];
      case 'ApplicantHired': return [`${whose} hire of `, strong(d.applicantName)];
      case 'ApplicantRatingRequested': return [`${whose} rating request for `, strong(d.applicantName)];
      default: return [`${whose} action`];
    }
  }

  /** The applicant (or position) a group names, and the position it is for. */
  function groupRef(group) {
    const d = (group.action && group.action.descriptor) || {};
    const id = group.refId || d.applicantId;
    const known = id ? refs.get(id) : null;
    const name = (d.applicantId && d.applicantId === id && d.applicantName) || (known && known.name) || id || 'someone';
    const positionId = d.positionId || (known && known.kind === 'applicant' ? known.applicant.position : null);
    const position = d.positionName || (positionId && refs.get(positionId) ? refs.get(positionId).name : null);
    return { name, position: known && known.kind === 'position' ? null : position };
  }

  /** One sentence per group, from its fields. */
  function noticeSentence(group) {
    const who = whoDidIt(group);
    switch (group.reason) {
      case 'COMMENT': return [...who, ' commented on ', ...whoseWhat(group)];
      case 'LIKE': return [...who, ' liked ', ...whoseWhat(group)];
      case 'REPLY':
        return group.action
          ? [...who, ' also commented on ', ...whoseWhat(group)]
          : [...who, ' replied in a discussion you took part in'];
      case 'ASSIGNED': return [...who, ' assigned you to ', strong(groupRef(group).name)];
      case 'RATING_REQUESTED': {
        const { name, position } = groupRef(group);
        return [...who, ' asked you to rate ', strong(name), position ? ` for ${position}` : ''];
      }
      case 'HIRED': {
        const { name, position } = groupRef(group);
        return [...who, ' hired ', strong(name), position ? ` as ${position}` : ''];
      }
      default: return [...who, ` (${group.reason})`];
    }
  }

  const plain = (parts) => parts.map((part) => (part instanceof Node ? part.textContent : part)).join('');

  function noticeEl(group) {
    const el = h('li', { class: 'notice-item', 'data-testid': 'notice-group' });
    el.append(h('button', { type: 'button', class: 'notice-row', onclick: guarded(() => readGroup(el)) }));
    fillNotice(el, group);
    return el;
  }

  /** (Re)draws a group's row in place. */
  function fillNotice(el, group) {
    el.dataset.groupId = group.id;
    el.dataset.reason = group.reason;
    el.dataset.read = String(group.read);
    el.dataset.seen = String(group.seen);
    if (group.action) el.dataset.actionId = group.action.actionId;
    else delete el.dataset.actionId;
    el.classList.toggle('unread', !group.read);
    const first = group.actors[0];
    const many = (group.reason === 'COMMENT' || group.reason === 'REPLY') && group.count > 1;
    el.querySelector('.notice-row').replaceChildren(
      h('span', {
        class: `avatar small ${first ? colour(first.userId) : ''}`,
        'aria-hidden': 'true',
        text: first ? initials(actorName(first)) : '?',
      }),
      h('span', { class: 'notice-text' },
        group.read ? null : h('span', { class: 'visually-hidden', text: 'Unread: ' }),
        h('span', { class: 'notice-line', 'data-testid': 'notice-line' }, ...noticeSentence(group)),
        h('span', { class: 'notice-meta' }, timeEl(group.lastAt), many ? ` · ${group.count} comments` : null)),
      h('span', { class: 'notice-dot', 'aria-hidden': 'true' }));
  }

  /** Puts a group where its latest notification says (latest first),
   * redrawing its row if shown. A group archived elsewhere (nothing left in
   * it) leaves the list. `live` groups below everything loaded wait for
   * their page. */
  function placeGroup(group, live, flash) {
    const existing = notices.byId.get(group.id);
    let at = existing ? notices.entries.indexOf(existing) : -1;
    if (existing) {
      notices.entries.splice(at, 1);
      notices.byId.delete(group.id);
    }
    if (group.count === 0) {
      if (existing) existing.el.remove();
      return;
    }
    // Nothing new in it (read, say): it keeps its place.
    if (!existing || existing.group.lastAt !== group.lastAt) {
      const t = Date.parse(group.lastAt);
      at = notices.entries.findIndex((entry) => Date.parse(entry.group.lastAt) <= t);
      if (at === -1) {
        if (live && notices.hasNext) {
          if (existing) existing.el.remove();
          return;
        }
        at = notices.entries.length;
      }
    }
    const el = existing ? existing.el : noticeEl(group);
    if (existing) fillNotice(el, group);
    const next = notices.entries[at];
    $('notices-list').insertBefore(el, next ? next.el : null);
    const entry = { group, el };
    notices.entries.splice(at, 0, entry);
    notices.byId.set(group.id, entry);
    if (flash) flashCard(el);
  }

  function dropGroup(id) {
    const shown = notices.byId.get(id);
    if (!shown) return;
    notices.entries.splice(notices.entries.indexOf(shown), 1);
    notices.byId.delete(id);
    shown.el.remove();
  }

  function noticeListState() {
    const empty = notices.loaded && !notices.loading && !notices.entries.length && !notices.hasNext;
    $('notices-empty').hidden = !empty;
    $('notices-more').hidden = !notices.loaded || notices.loading || !notices.hasNext;
  }

  async function loadNotices() {
    if (notices.loading || !notices.hasNext) return;
    const generation = notices.generation;
    // "Load more" hides while loading: where should the focus go after?
    const moreHadFocus = document.activeElement === $('notices-more');
    notices.loading = true;
    notices.queued = [];
    $('notices-list').setAttribute('aria-busy', 'true');
    $('notices-loading').hidden = false;
    noticeListState();
    try {
      const data = await gql(Q.notifications, { after: notices.endCursor });
      if (generation !== notices.generation) return;
      const page = data.notifications;
      if (!notices.streaming) setNoticeCounts(page);
      notices.endCursor = page.pageInfo.endCursor || notices.endCursor;
      notices.hasNext = page.pageInfo.hasNextPage;
      const known = notices.byId.size;
      for (const { node } of page.edges) placeGroup(node, false, false);
      notices.loaded = true;
      // The button may hide now: the focus goes on to the first new row.
      const next = notices.entries[known];
      if (moreHadFocus && next) next.el.querySelector('.notice-row').focus();
      // What changed while the page was on its way is newer than the page.
      for (const event of notices.queued) applyNoticeEvent(event);
    } finally {
      if (generation === notices.generation) {
        notices.loading = false;
        notices.queued = null;
        $('notices-list').setAttribute('aria-busy', 'false');
        $('notices-loading').hidden = true;
        noticeListState();
      }
    }
  }

  /** Starts the list over (the stream may have missed something). */
  function reloadNotices() {
    notices.generation += 1;
    for (const entry of notices.entries) entry.el.remove();
    Object.assign(notices, {
      entries: [], byId: new Map(), endCursor: null, hasNext: true, loaded: false, loading: false, queued: null, stale: false,
    });
    guarded(loadNotices)();
  }

  function applyNoticeEvent(event) {
    if (event.kind === 'REMOVED') {
      dropGroup(event.groupId);
    } else if (event.group) {
      // New groups and groups with something new in them draw the eye.
      const shown = notices.byId.get(event.group.id);
      placeGroup(event.group, true, !shown || shown.group.lastAt !== event.group.lastAt);
    }
    noticeListState();
  }

  function onNoticeEvent(event) {
    notices.streaming = true;
    setNoticeCounts(event);
    if (event.kind === 'ADDED' && event.group) announce(`New notification: ${plain(noticeSentence(event.group))}`);
    if (event.kind === 'COUNTS') return;
    if (notices.queued) notices.queued.push(event);
    else if (notices.loaded) applyNoticeEvent(event);
  }

  /** What a mark changed, from its reply: only while the stream is down. */
  function applyChanged(changed) {
    if (notices.streaming) return;
    setNoticeCounts(changed);
    for (const group of changed.groups) {
      if (notices.byId.has(group.id)) placeGroup(group, true, false);
    }
  }

  function subscribeNotices() {
    if (notices.stop) notices.stop();
    notices.streaming = false;
    notices.starts = 0;
    let ended = false;
    const fail = (err) => {
      if (ended) return;
      ended = true;
      notices.stop = null;
      notices.streaming = false;
      if (err.code === 'LAGGED') {
        // Fell behind: start over, the list too.
        markNoticesStale();
        subscribeNotices();
      } else {
        toast(`Live notifications stopped: ${err.message}`);
      }
    };
    // The variables are asked for at every (re)start of the stream: after
    // the first, what happened while away is in no event, so the list is
    // read again.
    const variables = () => {
      notices.starts += 1;
      if (notices.starts > 1) markNoticesStale();
      return {};
    };
    notices.stop = live.subscribe(Q.noticeEvents, variables, {
      next: (payload) => {
        const event = payload.data && payload.data.notificationEvents;
        if (event) onNoticeEvent(event);
        else if (payload.errors) fail(toError(payload.errors));
      },
      error: fail,
      complete: () => fail(new GraphQLError('the server ended the stream', 'COMPLETE')),
    });
  }

  function markNoticesStale() {
    notices.streaming = false;
    if (!notices.loaded && !notices.loading) return;
    if (!$('notices-panel').hidden) reloadNotices();
    else notices.stale = true;
  }

  async function readGroup(el) {
    const entry = notices.byId.get(el.dataset.groupId);
    if (!entry || entry.group.read) return;
    // Shown read at once; the stream's UPDATED (on every page of ours)
    // brings the group as it is and the counts.
    const before = entry.group;
    entry.group = { ...before, read: true, unreadCount: 0 };
    fillNotice(el, entry.group);
    try {
      const data = await gql(Q.markRead, { ids: [before.id] });
      applyChanged(data.markRead);
      announce('Marked read');
    } catch (err) {
      if (notices.byId.get(before.id) === entry && entry.group.read && !before.read) {
        entry.group = before;
        fillNotice(el, before);
      }
      throw err;
    }
  }

  async function readAll() {
    const button = $('notices-read-all');
    button.disabled = true;
    try {
      const data = await gql(Q.markAllRead);
      applyChanged(data.markAllRead);
      announce('All notifications marked read');
    } finally {
      button.disabled = false;
    }
  }

  async function markSeen() {
    const data = await gql(Q.markSeen);
    if (!notices.streaming) setNoticeCounts(data.markSeen);
  }

  function noticesOpen() {
    return !$('notices-panel').hidden;
  }

  function openNotices() {
    $('notices-panel').hidden = false;
    $('bell').setAttribute('aria-expanded', 'true');
    $('notices-panel').focus();
    if (!notices.loaded || notices.stale) reloadNotices();
    // Opening the bell is seeing what is in it.
    guarded(markSeen)();
  }

  function closeNotices(refocus) {
    if (!noticesOpen()) return;
    $('notices-panel').hidden = true;
    $('bell').setAttribute('aria-expanded', 'false');
    if (refocus) $('bell').focus();
  }

  function setUpNotices() {
    $('bell').addEventListener('click', () => (noticesOpen() ? closeNotices(false) : openNotices()));
    $('notices-read-all').addEventListener('click', guarded(readAll));
    $('notices-more').addEventListener('click', guarded(loadNotices));
    document.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && noticesOpen()) {
        event.preventDefault();
        closeNotices(true);
      }
    });
    // A click elsewhere closes the panel. (The path, not the target: a
    // click on a row redraws the row, and its target leaves the page.)
    document.addEventListener('click', (event) => {
      if (noticesOpen() && !event.composedPath().includes($('bell-wrap'))) closeNotices(false);
    });
    subscribeNotices();
    // The stream begins with the counts; this only helps if it cannot run.
    guarded(async () => {
      const data = await gql(Q.noticeCounts);
      if (!notices.streaming) setNoticeCounts(data.notificationCounts);
    })();
  }

  // ---------------------------------------------------------------- start

  let live = null;

  async function start() {
    const response = await fetch('roster.json');
    if (!response.ok) throw new Error(`the roster did not load (${response.status})`);
    roster = await response.json();
    indexRoster();
    const wanted = new URLSearchParams(location.search).get('user');
    me = people.get(wanted) || people.get('rita') || roster.users[0];
    renderPicker();
    renderMe();
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    live = new LiveClient(`${scheme}://${location.host}/graphql/ws`,
      { 'x-riverfeed-tenant': TENANT, 'x-riverfeed-user': me.id }, liveState);
    setUpNotices();
    $('composer').addEventListener('submit', guarded(postStatus));
    // Ctrl+Enter (⌘+Enter) sends from any text box of the page.
    document.addEventListener('keydown', (event) => {
      const box = event.target;
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey) && box.form && box.tagName === 'TEXTAREA') {
        event.preventDefault();
        box.form.requestSubmit();
      }
    });
    $('feed-more').addEventListener('click', guarded(loadFeed));
    $('slice-more').addEventListener('click', guarded(loadSlice));
    nearEnd.observe($('feed-sentinel'));
    nearEnd.observe($('slice-sentinel'));
    window.addEventListener('hashchange', route);
    // Relative times age; refresh them now and then.
    setInterval(() => {
      for (const t of document.querySelectorAll('time[datetime]')) t.textContent = ago(t.getAttribute('datetime'));
    }, 60000);
    route();
    await loadFeed();
  }

  document.addEventListener('DOMContentLoaded', guarded(start));
})();
