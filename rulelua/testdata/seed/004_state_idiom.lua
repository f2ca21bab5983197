-- Seed 004's context as its Python hands it to lupa:
--   lua.globals().context = RuleContext(turn=TurnState(number=5, token_usage=0.85), ...,
--                                       state=PluginState(get=getter, set=setter))
-- so a script reads and writes its plugin's state through context.state.
local warnings = context.state.get('warnings') or 0
if context.turn.token_usage > 0.8 then
    context.state.set('warnings', warnings + 1)
    notify('Token budget at ' .. math.floor(context.turn.token_usage * 100) .. '% (warning ' .. (warnings + 1) .. ')', 'high')
end
return context.state.get('warnings') ~= warnings
