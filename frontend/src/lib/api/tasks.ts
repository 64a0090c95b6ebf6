// /v1/tasks: scheduled tasks and their runs.
import { del, get, patch, post, query, segment } from './client';
import type { Deleted, List, NewTask, RunView, TaskPatch, TaskView } from './types';

export const listTasks = () => get<List<TaskView>>('/v1/tasks');

export const createTask = (task: NewTask) => post<TaskView>('/v1/tasks', task);

export const updateTask = (id: string, change: TaskPatch) => patch<TaskView>(`/v1/tasks/${segment(id)}`, change);

export const cancelTask = (id: string) => del<Deleted>(`/v1/tasks/${segment(id)}`);

export const runTask = (id: string) => post<RunView>(`/v1/tasks/${segment(id)}/run`);

export const listRuns = (id: string, limit = 50) =>
	get<List<RunView>>(`/v1/tasks/${segment(id)}/runs${query({ limit })}`);
