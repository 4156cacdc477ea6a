/* Internal to the trainer: the two things it reads from the launcher's environment
 * itself, because coll.h answers them only through a communicator or not at all (see
 * trainer_launcher.c). */
#ifndef TRAIN_TRAINER_LAUNCHER_H
#define TRAIN_TRAINER_LAUNCHER_H

/* The world size a launcher set (WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, the
 * first that is a positive number), or 0 when none did: whether to join a job at all. */
int trainer_launcher_world(void);
/* LOCAL_RANK when set (the GPU a CUDA backend picks), else `fallback`. */
int trainer_launcher_local_rank(int fallback);

#endif
