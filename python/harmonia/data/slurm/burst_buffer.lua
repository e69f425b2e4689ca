--[[
Harmonia's burst buffers behind Slurm's burst_buffer/lua plugin (docs/slurm.md).

Install beside slurm.conf (with BurstBufferType=burst_buffer/lua) and point the two settings
below at Harmonia's hook configuration and at a Python that has the harmonia package;
`harmonia cluster up` writes both for its own cluster. Every hook runs
`python -m harmonia.slurm_bb CONFIG HOOK ARGS...`, which talks to harmonia-schedd and the
harmonia-bbd buffer nodes; a hook that fails returns its message to Slurm (sbatch prints
job_process's, the others land in the job's reason and slurmctld's log).
--]]

HARMONIA_BB_CONFIG = "/etc/slurm/harmonia-bb.json"
HARMONIA_PYTHON = "/usr/bin/python3"

local function quote(text)
	return "'" .. string.gsub(tostring(text), "'", "'\\''") .. "'"
end

-- Runs one hook; returns Slurm's code and the hook's output (its message on failure).
local function run(hook, ...)
	local command = quote(HARMONIA_PYTHON) .. " -m harmonia.slurm_bb " ..
		quote(HARMONIA_BB_CONFIG) .. " " .. hook
	local count = select("#", ...)
	local args = {...}
	for i = 1, count do
		command = command .. " " .. quote(args[i] == nil and "" or args[i])
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
	text = string.gsub(text, "%s+$", "")
	if status ~= 0 then
		slurm.log_error("harmonia burst buffer %s failed: %s", hook, text)
		return slurm.ERROR, text
	end
	return slurm.SUCCESS, text
end

function slurm_bb_job_process(job_script, uid, gid)
	local rc, text = run("job_process", job_script, uid, gid)
	if rc ~= slurm.SUCCESS then
		return rc, text
	end
	return rc
end

function slurm_bb_pools()
	return run("pools")
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
	return run("setup", job_id, uid, gid, pool, bb_size, job_script)
end

function slurm_bb_data_in(job_id, job_script, uid, gid)
	return run("data_in", job_id, job_script, uid, gid)
end

function slurm_bb_real_size(job_id, uid, gid)
	return run("real_size", job_id, uid, gid)
end

function slurm_bb_paths(job_id, job_script, path_file, uid, gid)
	return run("paths", job_id, job_script, path_file, uid, gid)
end

function slurm_bb_pre_run(job_id, job_script, uid, gid)
	return run("pre_run", job_id, job_script, uid, gid)
end

function slurm_bb_post_run(job_id, job_script, uid, gid)
	return run("post_run", job_id, job_script, uid, gid)
end

function slurm_bb_data_out(job_id, job_script, uid, gid)
	return run("data_out", job_id, job_script, uid, gid)
end

function slurm_bb_job_teardown(job_id, job_script, hurry, uid, gid)
	return run("teardown", job_id, job_script, hurry, uid, gid)
end

function slurm_bb_get_status(uid, gid, ...)
	return run("status", uid, gid, ...)
end
