-- Appended to every script: prints the 99.9th percentile of the latency,
-- which `wrk --latency` leaves out, as a line of its own report:
--   99.9%  2.10ms
done = function(summary, latency, requests)
  io.write(string.format("   99.9%%  %dus\n", latency:percentile(99.9)))
end
