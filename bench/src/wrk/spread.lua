-- `increment(1)` spread over many instances, for W2: each request goes to
-- the next of `w2-0` .. `w2-<n-1>` (n = the script's argument, default
-- 64), each thread starting at its own place, so 64 connections keep
-- about 64 instances busy at once:
--   wrk -t2 -c64 -d10s --latency -s spread.lua http://127.0.0.1:7878 -- 64
local threads = 0

function setup(thread)
  thread:set("first", threads)
  threads = threads + 1
end

function init(args)
  instances = tonumber(args[1]) or 64
  sent = first * 997
end

function request()
  sent = sent + 1
  local path = "/actors/counter/w2-" .. (sent % instances) .. "/actions/increment"
  return wrk.format("POST", path, { ["Content-Type"] = "application/json" }, "[1]")
end
