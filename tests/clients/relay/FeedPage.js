// A Relay page of the viewer's feed; compiled by relay-compiler in
// relay.test.mjs, never run.
import { graphql } from 'relay-runtime';

export const query = graphql`
  query FeedPageQuery($first: Int!) {
    viewer { name }
    feed(first: $first) {
      edges { cursor node { actionId action { descriptor { ... on StatusPost { text } } } } }
      pageInfo { hasNextPage endCursor }
    }
  }
`;
