-- wrk script: one small non-streaming chat completion per request.
-- BENCH_PATH, BENCH_MODEL and BENCH_KEY come from the environment;
-- BENCH_DELAY_MS paces each connection (for a fixed request rate).
wrk.method = "POST"
wrk.path = os.getenv("BENCH_PATH") or "/v1/chat/completions"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_KEY") or "")
wrk.body = '{"model":"' .. (os.getenv("BENCH_MODEL") or "fake-echo") ..
  '","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the benchmark"}]}'
local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
if delay_ms > 0 then
  function delay() return delay_ms end
end
