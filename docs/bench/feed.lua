-- wrk script: the reads workload's feed page, as random readers of the
-- bench's load graph (users u0 … u49999, tenant "bench"). See
-- docs/performance.md, "Checking the load generator".
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-riverfeed-tenant"] = "bench"
wrk.body = [[{"query":"query { feed(first: 25) { edges { cursor node { actionId relevancy reason { kind actorId } action { id actorId conducted commentCount likeCount actor { id name } refIds descriptor { __typename ... on StatusPost { text } ... on ApplicationRating { raterName applicantName positionName ratingScore ratingText } ... on NewApplicant { applicantName positionName } ... on ApplicantHired { applicantName positionName hiredByName } ... on ApplicantRatingRequested { applicantName positionName raterName requestedByName } } } } } pageInfo { hasNextPage endCursor } } }"}]]

local users = tonumber(os.getenv("USERS") or "50000")

request = function()
  wrk.headers["x-riverfeed-user"] = "u" .. math.random(0, users - 1)
  return wrk.format()
end

-- Each wrk thread counts its own failed pages (a status other than 200, or
-- GraphQL errors); `done` adds them up.
failures = 0
local threads = {}

setup = function(thread)
  table.insert(threads, thread)
end

response = function(status, headers, body)
  if status ~= 200 or body:find('"errors"', 1, true) then
    failures = failures + 1
  end
end

done = function(summary, latency, requests)
  local failed = 0
  for _, thread in ipairs(threads) do
    failed = failed + thread:get("failures")
  end
  io.write(string.format("pages/s %.0f  p50 %.3f ms  p99 %.3f ms  failures %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, failed))
end
