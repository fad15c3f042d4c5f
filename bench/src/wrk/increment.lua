-- `increment(1)` on the one instance named by the URL, for W1 (one
-- connection) and the hot instance (64 connections):
--   wrk -t1 -c1 -d10s --latency -s increment.lua \
--     http://127.0.0.1:7878/actors/counter/w1/actions/increment
wrk.method = "POST"
wrk.body = "[1]"
wrk.headers["Content-Type"] = "application/json"
