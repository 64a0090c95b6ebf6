-- wrk script: one small non-streaming request per request, in the protocol
-- BENCH_API names: "chat" (default, /v1/chat/completions), "responses"
-- (/v1/responses) or "messages" (/v1/messages). BENCH_MODEL and BENCH_KEY
-- come from the environment; BENCH_DELAY_MS paces each connection (for a
-- fixed request rate).
local api = os.getenv("BENCH_API") or "chat"
local model = os.getenv("BENCH_MODEL") or "fake-echo"
local key = os.getenv("BENCH_KEY") or ""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if api == "responses" then
  wrk.path = "/v1/responses"
  wrk.headers["Authorization"] = "Bearer " .. key
  wrk.body = '{"model":"' .. model .. '","store":false,"instructions":"You are terse.","input":"Say hello to the benchmark"}'
elseif api == "messages" then
  wrk.path = "/v1/messages"
  wrk.headers["x-api-key"] = key
  wrk.headers["anthropic-version"] = "2023-06-01"
  wrk.body = '{"model":"' .. model .. '","max_tokens":64,"system":"You are terse.",' ..
    '"messages":[{"role":"user","content":"Say hello to the benchmark"}]}'
else
  wrk.path = "/v1/chat/completions"
  wrk.headers["Authorization"] = "Bearer " .. key
  wrk.body = '{"model":"' .. model .. '","messages":[{"role":"system","content":"You are terse."},' ..
    '{"role":"user","content":"Say hello to the benchmark"}]}'
end
local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
if delay_ms > 0 then
  function delay() return delay_ms end
end
