--[[
Harmonia's burst buffers behind Slurm's burst_buffer/lua plugin (docs/slurm.md).

Install beside slurm.conf (BurstBufferType=burst_buffer/lua), with harmonia_bb.lua and
harmonia-bb.json (the settings) in the same directory. The hooks slurmctld runs itself, holding
its locks (job_process, pools, paths), answer here, in this process, from harmonia_bb.lua; the
others run in slurmscriptd, which kills them after burst_buffer.conf's timeouts, and start
`python -m harmonia.slurm_bb harmonia-bb.json HOOK ARGS...`, which talks to harmonia-schedd and
the harmonia-bbd buffer nodes. A hook that fails returns a one-line message: sbatch prints
job_process's; the others become the job's reason (scontrol show job) and land in
slurmctld's log.
--]]

local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local CONFIG = HERE .. "/harmonia-bb.json"

-- harmonia_bb.lua and the settings, or nil and why not (a missing lua-posix, a bad JSON file).
local function load()
	local ok, harmonia = pcall(dofile, HERE .. "/harmonia_bb.lua")
	if not ok then
		return nil, nil, "harmonia_bb.lua: " .. tostring(harmonia)
	end
	local read, config = harmonia.try(harmonia.read_config, CONFIG)
	if not read then
		return nil, nil, config
	end
	return harmonia, config
end

local function failed(hook, message)
	slurm.log_error("harmonia burst buffer %s failed: %s", hook, message)
	return slurm.ERROR, message
end

local function quote(text)
	return "'" .. string.gsub(tostring(text), "'", "'\\''") .. "'"
end

-- Runs harmonia.slurm_bb's hook (only from the asynchronous hooks); Slurm's code and the
-- hook's output, on one line (the job's reason shows it).
local function run(hook, ...)
	local harmonia, config, why = load()
	if not harmonia then
		return failed(hook, why)
	end
	local command = quote(config.python) .. " -m harmonia.slurm_bb " .. quote(CONFIG) .. " " .. hook
	for i = 1, select("#", ...) do
		local arg = select(i, ...)
		command = command .. " " .. quote(arg == nil and "" or arg)
	end
	local out = os.tmpname()
	local status = os.execute(command .. " >" .. quote(out) .. " 2>&1 </dev/null")
	local text = ""
	local file = io.open(out, "r")
	if file then
		text = file:read("*all")
		file:close()
	end
	os.remove(out)
	if status ~= 0 then
		text = text:gsub("^%s+", ""):gsub("%s+$", ""):gsub("%s*\n%s*", "; ")
		return failed(hook, text ~= "" and text or ("exit status " .. tostring(status)))
	end
	return slurm.SUCCESS, (text:gsub("%s+$", ""))
end

-- harmonia_bb.lua, the settings and the job's request from its script, read in this process;
-- nil and why not on a bad one.
local function request_of(job_script)
	local harmonia, config, why = load()
	if not harmonia then
		return nil, nil, nil, why
	end
	local ok, request = harmonia.try(function()
		return harmonia.parse(harmonia.read_script(job_script), config)
	end)
	if not ok then
		return nil, nil, nil, request
	end
	return harmonia, config, request
end

-- Synchronous: slurmctld waits, holding its locks. No program is started. --------------------

function slurm_bb_job_process(job_script)
	local harmonia, _, _, refused = request_of(job_script)
	if not harmonia then
		return slurm.ERROR, refused
	end
	return slurm.SUCCESS
end

function slurm_bb_pools()
	local harmonia, config, why = load()
	if not harmonia then
		return failed("pools", why)
	end
	return slurm.SUCCESS, harmonia.pools(config)
end

function slurm_bb_paths(job_id, job_script, path_file)
	local harmonia, config, request, refused = request_of(job_script)
	if not harmonia then
		return failed("paths", refused)
	end
	local ok, problem = harmonia.try(harmonia.write_paths, path_file,
		harmonia.job_env(config, job_id, request))
	if not ok then
		return failed("paths", problem)
	end
	return slurm.SUCCESS
end

-- Asynchronous: slurmscriptd runs these and kills them after the configured timeout. ----------

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
	local harmonia, _, request, refused = request_of(job_script)
	if not harmonia then
		return failed("setup", refused)
	end
	return run("setup", job_id, uid, gid, pool, bb_size, harmonia.request_json(request))
end

function slurm_bb_data_in(job_id, job_script)
	return run("data_in", job_id)
end

function slurm_bb_real_size(job_id)
	return run("real_size", job_id)
end

function slurm_bb_pre_run(job_id, job_script)
	return run("pre_run", job_id)
end

function slurm_bb_post_run(job_id, job_script)
	return run("post_run", job_id)
end

function slurm_bb_data_out(job_id, job_script)
	return run("data_out", job_id)
end

function slurm_bb_job_teardown(job_id, job_script, hurry)
	return run("teardown", job_id, hurry)
end

-- `scontrol show bbstat [json]`: always succeeds (Slurm prints only "Error running
-- slurm_bb_get_status" otherwise); a node or daemon that does not answer is named in the text.
function slurm_bb_get_status(...)
	local rc, text = run("status", ...)
	if rc ~= slurm.SUCCESS then
		return slurm.SUCCESS, "harmonia: bbstat failed: " .. text .. "\n"
	end
	return rc, text .. "\n"
end
