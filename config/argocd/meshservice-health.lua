-- Argo CD health check for mesh.aether.io/MeshService (argocd-cm key
-- resource.customizations.health.mesh.aether.io_MeshService). It reads the conditions the
-- controller writes the way kstatus (Flux, kstatus-based waits) reads them, so both tools agree:
--   Stalled=True                      -> Degraded    (kstatus Failed: a user must act)
--   Reconciling=True, or Ready=False  -> Progressing (kstatus InProgress: settling on its own)
--   a status for an older generation  -> Progressing
--   Ready=True                        -> Healthy     (kstatus Current)
-- The message is the deciding condition's: Stalled's and Reconciling's name their causes.
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the MeshService controller to write a status"
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= nil
    and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the MeshService controller to observe generation " .. obj.metadata.generation
  return hs
end
local byType = {}
for _, c in ipairs(obj.status.conditions) do
  byType[c.type] = c
end
local function describe(c)
  return c.type .. "=" .. c.status .. " " .. (c.reason or "") .. ": " .. (c.message or "")
end
if byType["Stalled"] ~= nil and byType["Stalled"].status == "True" then
  hs.status = "Degraded"
  hs.message = byType["Stalled"].message
  return hs
end
if byType["Reconciling"] ~= nil and byType["Reconciling"].status == "True" then
  hs.status = "Progressing"
  hs.message = byType["Reconciling"].message
  return hs
end
local ready = byType["Ready"]
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
hs.status = "Progressing"
if ready ~= nil then
  hs.message = describe(ready)
else
  hs.message = "Waiting for the Ready condition"
end
return hs
