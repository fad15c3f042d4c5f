import { handler } from './host.mjs';

export const beginStep = handler('workflow', 'beginStep');
export const endStep = handler('workflow', 'endStep');
export const sleep = handler('workflow', 'sleep');
export const sleepUntil = handler('workflow', 'sleepUntil');
export const now = handler('workflow', 'now');
export const loopEnter = handler('workflow', 'loopEnter');
export const loopContinue = handler('workflow', 'loopContinue');
export const loopBreak = handler('workflow', 'loopBreak');
export const loopLeave = handler('workflow', 'loopLeave');
export const joinEnter = handler('workflow', 'joinEnter');
export const branch = handler('workflow', 'branch');
export const joinExit = handler('workflow', 'joinExit');
export const queueNext = handler('workflow', 'queueNext');
export const version = handler('workflow', 'version');
export const removed = handler('workflow', 'removed');
export const stepKey = handler('workflow', 'stepKey');
