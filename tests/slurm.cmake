# The cluster job scripts on a real Slurm (tests/slurm_test.sh): brings up a private single-node
# Slurm, runs jobs/cpu.sbatch with 2 tasks, interrupts and resumes it, compares parameters, stops
# the daemons. About a minute; needs root. Skips (77) when it cannot run here: not root, no Slurm
# packages and no apt-get, or a noeira without checkpointing.
if(TARGET noeira)
  add_test(NAME slurm_jobs
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/slurm_test.sh $<TARGET_FILE:noeira>
                   ${PROJECT_SOURCE_DIR})
  # RESOURCE_LOCK: one private Slurm at a time; PROCESSORS: the job's two ranks.
  set_tests_properties(slurm_jobs PROPERTIES LABELS "slurm;slow" SKIP_RETURN_CODE 77 TIMEOUT 600
                       PROCESSORS 2 RESOURCE_LOCK slurm)
endif()
