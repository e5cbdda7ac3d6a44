// Posting a status the Relay way; compiled by relay-compiler in
// relay.test.mjs, never run.
import { graphql } from 'relay-runtime';

export const mutation = graphql`
  mutation PostStatusMutation($text: String!) {
    recordAction(input: { descriptor: { statusPost: { text: $text } } }) { id }
  }
`;
