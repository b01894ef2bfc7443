"""Running one sim episode on an environment, below the runner: the Gymnasium episode loop
(`env_episode`), the physics knobs and energy of a third-party Gymnasium model (`gym_physics`)
and the one trajectory writer (`trajectory`). The runner's Gymnasium side and the standard suites
(`sim_suites.suites`) use them; they import neither."""
